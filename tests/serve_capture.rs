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
