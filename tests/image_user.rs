//! A plain eval on an image whose own `USER` is not root (`USER nobody`):
//! the sandbox starts as root (its main process, and root's preparation of
//! the agent user, keep root's capabilities), setup and checks run as the
//! image's user, the agent as reeval's agent user (uid 1000, no
//! capabilities); a setup cached from it is committed with the image's user,
//! and a later attempt from the cache runs as the first did. And the mode of
//! `/`, which the agent user's preparation changes on a FUSE root file system
//! only where no account needs its group bits.

mod common;

use std::process::Command as HostCommand;

use reeval::prelude::*;
use reeval::sandbox::DockerBackend;
use reeval::{Eval, Outcome, Record};

/// What each attempt checks: who ran what, and with which capabilities.
fn eval(dockerfile: std::path::PathBuf, nonce: String) -> Eval {
    Eval::new("image_user", |c| {
        Box::pin(async move {
            c.send("id -u > agent.txt; grep CapEff /proc/self/status >> agent.txt").await?;
            expect(c.exec("cat agent.txt").await?.stdout)
                .to_equal("1000\nCapEff:\t0000000000000000\n")?;
            expect(c.exec("id -un").await?.stdout).to_equal("nobody\n")?;
            expect(c.exec("cat /tmp/setup-user").await?.stdout).to_equal("nobody\n")?;
            // The main process (the engine's init) runs as root.
            expect(c.exec("stat -c %u /proc/1").await?.stdout).to_equal("0\n")?;
            // Its checks run as it: `/` keeps its group bits (see the test below).
            expect(c.exec("stat -c %a /").await?.stdout).to_equal("755\n")?;
            expect(c.exec("stat -c %u:%g . /home/agent").await?.stdout)
                .to_equal("1000:1000\n1000:1000\n")?;
            Ok(())
        })
    })
    .environment(move || {
        Environment::new()
            .image(Image::dockerfile(dockerfile.clone()))
            .env("IMAGE_USER_NONCE", nonce.clone())
            .file("given.txt", "given\n")
            .setup("id -un > /tmp/setup-user")
    })
}

fn detail<'a>(r: &'a Record, phase: &str) -> &'a str {
    r.phases.iter().find(|p| p.phase.as_str() == phase).map(|p| p.detail.as_str()).unwrap_or("")
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn an_image_whose_user_is_not_root_runs_setup_and_checks_as_it_and_the_agent_as_its_own() {
    require_docker!();
    let nonce = format!("{}-{}", std::process::id(), reeval::runner::new_run_id());
    let dir = common::temp_dir("image-user");
    let dockerfile = dir.join("Dockerfile");
    std::fs::write(
        &dockerfile,
        format!(
            "FROM reeval/base:latest\nRUN echo {nonce} > /opt/marker\nWORKDIR /work\nUSER nobody\n"
        ),
    )
    .unwrap();
    let runner = |tag: &str| {
        common::runner_with(tag, |c| {
            c.settings.test_threads = 1;
            c.settings.trials = Some(1);
            c.settings.setup_cache = true;
        })
    };
    // The first attempt misses the setup cache, and the run waits for its fill.
    let first = runner("image-user-a")
        .run(vec![eval(dockerfile.clone(), nonce.clone())])
        .await
        .expect("preflight");
    let miss = &first.records[0];
    let image = miss.image.clone().expect("the image built");
    assert_eq!(miss.outcome, Outcome::Pass, "{:?} {:?}", miss.message, miss.phases);
    let digest = detail(miss, "snapshot")
        .split("setup cache miss, ")
        .nth(1)
        .and_then(|d| d.strip_suffix(" is filled in the background"))
        .expect("the miss asked for a fill")
        .to_string();
    let user = HostCommand::new("docker")
        .args(["image", "inspect", "-f", "{{.Config.User}}", &format!("reeval/setup:{digest}")])
        .output()
        .expect("docker runs");
    assert_eq!(String::from_utf8_lossy(&user.stdout), "nobody\n", "the cached setup's user");

    // A later run starts from the cached setup, as the image's user again.
    let second = runner("image-user-b")
        .run(vec![eval(dockerfile.clone(), nonce.clone())])
        .await
        .expect("preflight");
    let hit = &second.records[0];
    assert_eq!(hit.outcome, Outcome::Pass, "{:?} {:?}", hit.message, hit.phases);
    assert_eq!(detail(hit, "setup").strip_prefix("setup cache hit "), Some(digest.as_str()));
    assert_eq!(common::containers_of_run(&first.run_id).await, 0);
    assert_eq!(common::containers_of_run(&second.run_id).await, 0);

    let docker = DockerBackend::connect().await.expect("the engine answers");
    for run in [&first.run_id, &second.run_id] {
        let (_, kept) = reeval::setup_cache::prune(&docker, Some(run)).await.expect("prune");
        assert!(kept.is_empty(), "{kept:?}");
    }
    let _ = HostCommand::new("docker").args(["rmi", "-f", &image]).output();
}

/// The mode of `/` an attempt's checks see, and whether uid 1000 and the
/// given user read `/etc` through it: on a FUSE root file system (this
/// engine's `fuse-overlayfs` storage), `/` without its group bits; elsewhere
/// as the image has it.
fn root_dir_eval(name: &str, extra_account: Option<&'static str>, user: &'static str) -> Eval {
    Eval::new(name, move |c| {
        Box::pin(async move {
            c.send("ls /etc > /dev/null && id -u > agent.txt").await?;
            expect(c.exec("cat agent.txt").await?.stdout).to_equal("1000\n")?;
            let fuse = c.exec("stat -f -c %T /").await?.stdout.starts_with("fuse");
            let mode = match (fuse, extra_account) {
                (true, None) => "705\n",
                _ => "755\n",
            };
            expect(c.exec("stat -c %a /").await?.stdout).to_equal(mode)?;
            let listed =
                c.exec(Command::shell("ls /etc > /dev/null && echo read").user(user)).await?;
            expect(listed.stdout).to_equal("read\n")?;
            Ok(())
        })
    })
    .environment(move || {
        let env = Environment::new().file("given.txt", "given\n");
        match extra_account {
            Some(line) => env.setup(format!("echo '{line}' >> /etc/passwd")),
            None => env,
        }
    })
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn the_root_directory_loses_its_group_bits_on_a_fuse_root_only_where_no_account_needs_them() {
    require_docker!();
    let report = common::runner_with("root-dir-mode", |c| c.settings.trials = Some(1))
        .run(vec![
            // Root's image, no other account in group 0: `/` without group bits
            // on FUSE, and an account of another group reads it by its other bits.
            root_dir_eval("root_image", None, "nobody"),
            // An account in group 0 (an OpenShift-style image): `/` as it was,
            // and that account still reads it by its group bits.
            root_dir_eval("group_0_account", Some("ocp:x:1001:0::/tmp:/bin/sh"), "1001:0"),
        ])
        .await
        .expect("preflight");
    assert_eq!(report.records.len(), 2);
    for r in &report.records {
        assert_eq!(r.outcome, Outcome::Pass, "{}: {:?} {:?}", r.eval, r.message, r.checks);
    }
    assert_eq!(common::containers_of_run(&report.run_id).await, 0);
}
