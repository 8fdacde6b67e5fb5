//! An image whose own user is not root, against the fake API server: its
//! pod's container runs as root and commands that name no user run as the
//! image's; an image whose user was not known is learned at start and its
//! pod created again as root; an image without `setpriv` is refused at
//! start. And the prologue's user switch as a real `sh` runs it.

use super::*;

/// A cluster whose pod is Ready once created and gone once deleted (until
/// created again), whose probe says `probe(pods created so far)`, and whose
/// other execs succeed.
fn cluster_whose_probe_says(
    probe: impl Fn(usize) -> &'static str + Send + Sync + 'static,
) -> impl Fn(&Seen) -> Reply + Send + Sync + 'static {
    let state = Mutex::new((0usize, false));
    move |r: &Seen| {
        let mut s = state.lock().unwrap();
        if r.target.contains("/exec?") {
            let stdout = if is_probe(r) { probe(s.0).as_bytes().to_vec() } else { vec![] };
            return Reply::Exec(Session { stdout, stderr: vec![], status: exited(0) });
        }
        match r.method.as_str() {
            "POST" => {
                if r.target.contains("/pods") {
                    *s = (s.0 + 1, false);
                }
                Reply::Json(201, r.body.clone())
            }
            "DELETE" => {
                s.1 = true;
                Reply::Json(200, json!({"kind": "Status", "status": "Success"}))
            }
            _ if s.1 => Reply::Json(
                404,
                json!({"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404}),
            ),
            _ => Reply::Json(
                200,
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}),
            ),
        }
    }
}

const ROOT_WITH_SETPRIV: &str = "reeval-probe-ids 0:0\nreeval-probe-setpriv\n";

fn pods_created(api: &FakeApi) -> Vec<Value> {
    let pods = api.seen().into_iter().filter(|s| s.method == "POST" && s.target.contains("/pods"));
    pods.map(|s| s.body).collect()
}

/// The user the prologue of each exec after the probes switches to (`$4`; empty: none).
fn users_of_execs(api: &FakeApi) -> Vec<String> {
    let execs = api.seen().into_iter().filter(|s| s.target.contains("/exec?") && !is_probe(s));
    execs.map(|s| s.argv[7].clone()).collect()
}

#[tokio::test]
async fn an_image_user_that_is_not_root_starts_the_pod_as_root_and_commands_as_it() {
    let api = FakeApi::start(cluster_whose_probe_says(|_| ROOT_WITH_SETPRIV)).await;
    let nobody = SandboxSpec { user: Some("nobody".into()), ..spec() };
    let sandbox = api.backend(KubernetesConfig::default()).create(&nobody).await.unwrap();
    sandbox.start().await.unwrap();
    let pod = &pods_created(&api)[0];
    assert_eq!(pod["spec"]["containers"][0]["securityContext"]["runAsUser"], 0);
    for cmd in
        [Command::new("id"), Command::new("id").user("0"), Command::new("id").user("1000:1000")]
    {
        sandbox.exec(ExecRequest::plain(&cmd, &[])).await.unwrap();
    }
    sandbox.upload("/workspace", archive::tar_of(&[]).unwrap()).await.unwrap();
    sandbox.kill(crate::Signal::Kill).await.unwrap();
    // Root's housekeeping (the upload, the kill) switches to no one.
    assert_eq!(users_of_execs(&api), ["nobody", "", "1000:1000", "", ""]);
    assert_eq!(pods_created(&api).len(), 1, "started once");

    // Root, or no user known: the image's own user, which the pod keeps.
    for user in [None, Some("root"), Some("0:0")] {
        let api = FakeApi::start(cluster_whose_probe_says(|_| ROOT_WITH_SETPRIV)).await;
        let given = SandboxSpec { user: user.map(String::from), ..spec() };
        api.backend(KubernetesConfig::default()).create(&given).await.unwrap();
        let pod = &pods_created(&api)[0];
        assert!(pod["spec"]["containers"][0]["securityContext"].get("runAsUser").is_none());
    }
}

#[tokio::test]
async fn an_image_user_learned_at_start_starts_the_pod_again_as_root() {
    // An image the cluster pulls: its user is not known until its pod runs.
    let api = FakeApi::start(cluster_whose_probe_says(|created| match created {
        1 => "reeval-probe-ids 65534:65534\nreeval-probe-setpriv\n",
        _ => ROOT_WITH_SETPRIV,
    }))
    .await;
    let sandbox = api.backend(KubernetesConfig::default()).create(&spec()).await.unwrap();
    sandbox.start().await.unwrap();
    let pods = pods_created(&api);
    assert_eq!(pods.len(), 2, "{:?}", api.calls());
    assert!(pods[0]["spec"]["containers"][0]["securityContext"].get("runAsUser").is_none());
    assert_eq!(pods[1]["spec"]["containers"][0]["securityContext"]["runAsUser"], 0);
    // Under a new name (a kubelet may find the first, torn down, by its name), its
    // label the same: the first pod's NetworkPolicy selects it.
    let first = pods[0]["metadata"]["name"].as_str().unwrap();
    assert_eq!(pods[1]["metadata"]["name"], format!("{first}-root"));
    assert_eq!(pods[1]["metadata"]["labels"]["dev.reeval.pod"], first);
    assert_eq!(sandbox.id(), first, "its id is the first pod's, as recorded");
    let calls = api.calls();
    assert!(calls.contains(&format!("DELETE /api/v1/namespaces/evals/pods/{first}")), "{calls:?}");
    sandbox.exec(ExecRequest::plain(&Command::new("id"), &[])).await.unwrap();
    assert_eq!(users_of_execs(&api), ["65534:65534"]);
}

#[tokio::test]
async fn an_image_whose_user_is_not_root_and_that_has_no_setpriv_is_refused_at_start() {
    let api = FakeApi::start(cluster_whose_probe_says(|_| "reeval-probe-ids 0:0\n")).await;
    let app = SandboxSpec { user: Some("app".into()), ..spec() };
    let sandbox = api.backend(KubernetesConfig::default()).create(&app).await.unwrap();
    let e = sandbox.start().await.unwrap_err();
    assert!(matches!(e, SandboxError::EngineConfig { .. }), "{e:?}");
    assert!(e.to_string().contains("the image's user app") && e.to_string().contains("`setpriv`"));
    // Root needs no switch: such an image runs as before.
    let api = FakeApi::start(cluster_whose_probe_says(|_| "reeval-probe-ids 0:0\n")).await;
    let sandbox = api.backend(KubernetesConfig::default()).create(&spec_root()).await.unwrap();
    sandbox.start().await.unwrap();
}

fn spec_root() -> SandboxSpec {
    SandboxSpec { user: Some("root".into()), ..spec() }
}

#[test]
fn the_probe_is_read_from_its_own_lines_only() {
    use crate::kubernetes::user::Probe;
    let seen = Probe::parse("motd\nreeval-probe-ids 1000:100\nreeval-probe-setpriv\n");
    assert_eq!(seen, Probe { ids: Some("1000:100".into()), setpriv: true });
    assert_eq!(seen.not_root(), Some("1000:100"));
    assert_eq!(Probe::parse("reeval-probe-ids 0:0\n").not_root(), None);
    assert_eq!(Probe::parse("out\n"), Probe::default());
}

/// The prologue as a real `sh` runs it, `setpriv` a stand-in that prints its
/// options: a uid with no entry in `/etc/passwd` gets group 0 and no
/// supplementary groups (as runc gives it), an explicit group is kept, root
/// switches to no one, and a variable of the block named as the prologue's
/// own changes nothing of it.
#[test]
fn the_prologue_switches_to_the_user_it_names() {
    let bin = std::env::temp_dir().join(format!("reeval-setpriv-{}", std::process::id()));
    std::fs::create_dir_all(&bin).unwrap();
    let fake = bin.join("setpriv");
    std::fs::write(&fake, "#!/bin/sh\nprintf 'setpriv'; while [ \"$1\" != -- ]; do printf ' %s' \"$1\"; shift; done; echo; shift; exec \"$@\"\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = |user: Option<&str>| {
        let spec = super::exec::ExecSpec {
            argv: vec!["sh".into(), "-c".into(), "echo \"$__rn|$(cat)\"".into()],
            env: vec![
                ("PATH".into(), format!("{}:/usr/bin:/bin", bin.display())),
                ("__rn".into(), "7".into()),
            ],
            user: user.map(String::from),
            stdin: super::exec::Stdin::Bytes(b"in"),
            ..Default::default()
        };
        let argv = spec.full_argv().unwrap();
        let mut input = spec.env_block().unwrap();
        input.extend_from_slice(b"in");
        let mut child = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(&input).unwrap();
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        (out.status.code(), text + &String::from_utf8_lossy(&out.stderr))
    };
    // uids 4242 and 4343 have no entry on any machine these tests run on.
    assert_eq!(run(Some("4242")).1, "setpriv --reuid=4242 --regid=0 --clear-groups\n7|in\n");
    assert_eq!(
        run(Some("4242:4343")).1,
        "setpriv --reuid=4242 --regid=4343 --clear-groups\n7|in\n"
    );
    assert_eq!(run(Some("0")).1, "7|in\n");
    assert_eq!(run(None).1, "7|in\n");
    let (code, said) = run(Some("no-such-user-here"));
    assert_eq!(code, Some(46));
    assert!(
        said.contains(
            "failed to run as user no-such-user-here: the image's /etc/passwd has no such user"
        ),
        "{said}"
    );
    std::fs::remove_dir_all(&bin).unwrap();
}
