//! `Ctx::serve` and `Ctx::capture` against the real engine.

mod common;

use std::time::Duration;

use reeval::prelude::*;
use reeval::{Eval, FailKind, Outcome};

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn serve_reaches_a_server_in_the_sandbox_and_capture_keeps_evidence() {
    require_docker!();
    let eval = Eval::new("serve_and_capture", |c| {
        Box::pin(async move {
            c.send("mkdir -p site && echo '<h1>hello from the sandbox</h1>' > site/index.html && echo body > site/other.txt && (cd site && nohup python3 -m http.server 8080 >/tmp/http.log 2>&1 &)").await?;
            let url = c.serve(8080).await?;
            expect(url.starts_with("http://127.0.0.1:")).to_equal(true)?;
            // The eval's own HTTP client reaches the service, twice (a relay per connection).
            for _ in 0..2 {
                let body = reqwest::get(format!("{url}/index.html"))
                    .await
                    .map_err(reeval::Error::other)?
                    .text()
                    .await
                    .map_err(reeval::Error::other)?;
                expect(body).to_contain("hello from the sandbox")?;
            }
            expect(c.serve(8080).await?).to_equal(url.clone())?;

            let page = c.capture("index", Artifact::url(format!("{url}/index.html"))).await?;
            expect(page.text.as_str()).to_contain("200 OK")?;
            expect(page.text.as_str()).to_contain("hello from the sandbox")?;
            c.capture("source", Artifact::file("site/index.html")).await?;
            let dir = c.capture("site", Artifact::dir("site")).await?;
            expect(dir.text.as_str()).to_contain("other.txt (5 bytes)")?;
            c.capture("listing", Artifact::command("ls site")).await?;
            let names: Vec<&str> = c.captures().iter().map(|c| c.name.as_str()).collect();
            expect(names).to_equal(vec!["index", "source", "site", "listing"])?;
            Ok(())
        })
    });
    let report = common::runner("serve").run(vec![eval]).await.unwrap();
    let r = &report.records[0];
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    assert_eq!(
        r.artifacts,
        [
            "captures/index.http.txt",
            "captures/source.html",
            "captures/site.tar",
            "captures/listing.txt"
        ]
    );
    let dir = report.run_dir.join(r.artifacts_dir_name());
    let page = std::fs::read_to_string(dir.join("captures/index.http.txt")).unwrap();
    assert!(page.contains("hello from the sandbox"));
    assert_eq!(
        std::fs::read_to_string(dir.join("captures/source.html")).unwrap(),
        "<h1>hello from the sandbox</h1>\n"
    );
    let mut tar = tar::Archive::new(std::fs::File::open(dir.join("captures/site.tar")).unwrap());
    let names: Vec<String> = tar
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(names.contains(&"site/other.txt".to_string()), "{names:?}");
    assert!(
        std::fs::read_to_string(dir.join("captures/listing.txt")).unwrap().contains("index.html")
    );
    assert!(r.phases.iter().any(|p| p.phase == "serve"));
    assert_eq!(common::containers_of_run(&report.run_id).await, 0);
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn serving_a_port_nobody_listens_on_fails_clearly() {
    require_docker!();
    let eval = Eval::new("serve_nothing", |c| {
        Box::pin(async move {
            c.serve_with(9999, Duration::from_secs(1)).await?;
            Ok(())
        })
    });
    let report = common::runner("serve-none").run(vec![eval]).await.unwrap();
    let r = &report.records[0];
    assert_eq!(r.outcome, Outcome::Fail(FailKind::Assertion));
    assert!(
        r.message
            .as_deref()
            .unwrap()
            .contains("failed to serve port 9999: nothing accepted connections"),
        "{:?}",
        r.message
    );
}

/// The entries of a kept directory capture: path, and content for a file (`->` target for a link).
fn tar_entries(path: &std::path::Path) -> Vec<(String, String)> {
    let mut tar = tar::Archive::new(std::fs::File::open(path).unwrap());
    tar.entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let name = e.path().unwrap().to_string_lossy().into_owned();
            let mut body = String::new();
            match e.link_name().unwrap() {
                Some(target) => body = format!("-> {}", target.to_string_lossy()),
                None => {
                    std::io::Read::read_to_string(&mut e, &mut body).unwrap();
                }
            }
            (name, body)
        })
        .collect()
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn capture_dirs_reads_their_parent_once_and_keeps_each_as_capture_does() {
    require_docker!();
    let eval = Eval::new("capture_dirs", |c| {
        Box::pin(async move {
            c.send(
                "mkdir -p logs/agent/deep logs/verifier logs/linked/a logs/linked/b \
                    && echo solved > logs/agent/oracle.txt && echo 3 > logs/agent/deep/n \
                    && ln -s oracle.txt logs/agent/latest && echo 1 > logs/verifier/reward.txt \
                    && echo not asked for > logs/other.txt \
                    && echo shared > logs/linked/a/f && ln logs/linked/a/f logs/linked/b/f",
            )
            .await?;
            let dirs = |names: &[&str]| -> Vec<(String, String)> {
                names.iter().map(|n| (format!("both-{n}"), format!("logs/{n}"))).collect()
            };
            let kept = c.capture_dirs(dirs(&["agent", "verifier"])).await?;
            expect(kept.len()).to_equal(2)?;
            expect(kept[0].text.as_str()).to_contain("deep/n (2 bytes)")?;
            // As `capture` keeps each, for comparison.
            c.capture("alone-agent", Artifact::dir("logs/agent")).await?;
            c.capture("alone-verifier", Artifact::dir("logs/verifier")).await?;
            // A hard link across them: the one read does not tell each whole, so each is read apart.
            c.capture_dirs(vec![
                ("link-a".into(), "logs/linked/a".into()),
                ("link-b".into(), "logs/linked/b".into()),
            ])
            .await?;
            // One directory is what `capture` does.
            c.capture_dirs(vec![("one-verifier".into(), "logs/verifier".into())]).await?;
            Ok(())
        })
    });
    let report = common::runner("capture-dirs").run(vec![eval]).await.unwrap();
    let r = &report.records[0];
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    let dir = report.run_dir.join(r.artifacts_dir_name());
    for name in ["agent", "verifier"] {
        let both = std::fs::read(dir.join(format!("captures/both-{name}.tar"))).unwrap();
        let alone = std::fs::read(dir.join(format!("captures/alone-{name}.tar"))).unwrap();
        assert!(both == alone, "{name}: the one read keeps the same bytes as a read of its own");
    }
    assert_eq!(
        tar_entries(&dir.join("captures/both-agent.tar")),
        [
            ("agent/deep/n".to_string(), "3\n".to_string()),
            ("agent/latest".to_string(), "-> oracle.txt".to_string()),
            ("agent/oracle.txt".to_string(), "solved\n".to_string()),
        ]
    );
    for name in ["a", "b"] {
        let entries = tar_entries(&dir.join(format!("captures/link-{name}.tar")));
        assert_eq!(entries, [(format!("{name}/f"), "shared\n".to_string())]);
    }
    let captures: Vec<&str> = r
        .phases
        .iter()
        .filter(|p| p.phase == reeval::Phase::Capture)
        .map(|p| p.detail.as_str())
        .collect();
    let one_read = captures.iter().filter(|d| d.ends_with("one read of /workspace/logs")).count();
    assert_eq!(one_read, 1, "{captures:?}");
    assert!(captures.iter().any(|d| d.contains("each read apart")), "{captures:?}");
}
