//! `[images]` in `reeval.toml` (`RunConfig::images`), against the real Docker
//! engine: images named by evals that exist nowhere (no registry is
//! reachable here) are mapped to the local base image, and the evals run; the
//! record names the mapped image and the one the eval named. Without the map
//! the same eval cannot start (the control that shows the map did it).

mod common;

use std::collections::BTreeMap;

use reeval::image_map::ImageMap;
use reeval::{Environment, Eval, Image, Outcome, Phase, Record, expect};

const MISSING: &str = "reeval-test/not-a-real-image:1";
const PINNED: &str =
    "reeval-test/pinned:1@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const BASE: &str = "reeval/base:latest";

fn eval_on(name: &str, image: &'static str) -> Eval {
    Eval::new(name, |c| {
        Box::pin(async move {
            // The base image's marker: the sandbox runs the mapped image.
            expect(c.exec("test -d /workspace && command -v python3").await?).to_succeed()?;
            Ok(())
        })
    })
    .environment(move || Environment::new().image(Image::from(image)))
}

fn map() -> ImageMap {
    let map: BTreeMap<String, String> =
        [(MISSING, BASE), (PINNED, BASE), ("reeval-test/harbor-prebuilt:1", BASE)]
            .into_iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
    ImageMap::new(&map).expect("the names parse")
}

/// A Harbor task whose `docker_image` is a name that exists nowhere, with no
/// workdir of its own: the workdir is the mapped image's WORKDIR.
fn harbor_task(dir: &std::path::Path) -> Eval {
    let t = dir.join("prebuilt");
    std::fs::create_dir_all(t.join("tests")).unwrap();
    std::fs::create_dir_all(t.join("solution")).unwrap();
    std::fs::write(
        t.join("task.toml"),
        "[task]\nname = \"reeval-tests/prebuilt\"\n[environment]\ndocker_image = \"reeval-test/harbor-prebuilt:1\"\nnetwork_mode = \"no-network\"\n",
    )
    .unwrap();
    std::fs::write(t.join("instruction.md"), "echo done > done.txt\n").unwrap();
    std::fs::write(t.join("solution/solve.sh"), "#!/bin/bash\necho done > done.txt\n").unwrap();
    std::fs::write(
        t.join("tests/test.sh"),
        "#!/bin/bash\npwd > /logs/verifier/cwd.txt\n[ -f done.txt ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n",
    )
    .unwrap();
    reeval::harbor::tasks(&t).expect("the task loads").remove(0)
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn mapped_images_run_and_the_record_names_both() {
    require_docker!();
    let dir = common::temp_dir("images-harbor");
    let evals =
        vec![eval_on("missing_image", MISSING), eval_on("pinned_image", PINNED), harbor_task(&dir)];
    let runner = common::runner_with("images-mapped", |c| {
        c.settings.harnesses = vec!["shell".into()];
        c.settings.test_threads = 3;
        c.settings.images = map();
    });
    let report = runner.run(evals).await.expect("preflight passes");
    let r: BTreeMap<String, Record> =
        report.records.iter().map(|r| (r.eval.clone(), r.clone())).collect();
    for (eval, named) in [
        ("missing_image", MISSING),
        ("pinned_image", PINNED),
        ("prebuilt", "reeval-test/harbor-prebuilt:1"),
    ] {
        let rec = &r[eval];
        assert_eq!(rec.outcome, Outcome::Pass, "{eval}: {:?}", rec.message);
        let image = rec.image.as_deref().unwrap_or_default();
        match eval {
            // A Harbor task runs on a layer of its image that gives its workdir to the agent.
            "prebuilt" => assert!(image.starts_with("reeval/img:"), "{eval}: {image}"),
            _ => assert_eq!(image, BASE, "{eval}: the record names the mapped image"),
        }
        assert_eq!(rec.image_mapped_from.as_deref(), Some(named), "{eval}: and the one it named");
        let image = rec.phases.iter().find(|p| p.phase == Phase::Image).expect("an image phase");
        assert!(
            image.detail.contains(&format!("the eval named {named}; [images] maps it")),
            "{eval}: {}",
            image.detail
        );
        let on_disk = common::json(&report.run_dir.join(rec.file_name()));
        assert_eq!(on_disk["imageMappedFrom"], named);
    }
    let harbor = &r["prebuilt"];
    assert_eq!(harbor.reward.as_ref().map(|m| m["reward"]), Some(1.0));
    let _ = std::fs::remove_dir_all(&dir);

    // The control: without the map, the name is looked for as it is, and is nowhere.
    let runner =
        common::runner_with("images-unmapped", |c| c.settings.harnesses = vec!["shell".into()]);
    let report = runner.run(vec![eval_on("missing_image", MISSING)]).await;
    match report {
        Ok(report) => {
            let rec = &report.records[0];
            assert_eq!(rec.outcome, Outcome::InfraError, "{:?}", rec.message);
            assert!(rec.message.as_deref().unwrap_or("").contains(MISSING), "{:?}", rec.message);
        }
        Err(e) => assert!(e.to_string().contains(MISSING), "{e}"),
    }
}

/// `Image::layered` on a mapped name: the map reaches the layer's base, the
/// steps run as root at build time, and the record still names both.
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_layer_is_built_on_a_mapped_base() {
    require_docker!();
    let eval = Eval::new("layered", |c| {
        Box::pin(async move {
            expect(c.exec("test \"$(cat /layered/owner)\" = root && command -v python3").await?)
                .to_succeed()?;
            Ok(())
        })
    })
    .environment(|| {
        Environment::new().image(Image::layered(
            Image::from(MISSING),
            ["mkdir -p /layered && id -un > /layered/owner"],
        ))
    });
    let runner = common::runner_with("images-layered", |c| {
        c.settings.harnesses = vec!["shell".into()];
        c.settings.images = map();
    });
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    let rec = &report.records[0];
    assert_eq!(rec.outcome, Outcome::Pass, "{:?}", rec.message);
    assert_eq!(rec.image_mapped_from.as_deref(), Some(MISSING));
}

/// A Dockerfile's `FROM` name that exists nowhere.
const DOCKERFILE_BASE: &str = "reeval-test/dockerfile-base:1";

/// An eval built from a Dockerfile in `dir` on [`DOCKERFILE_BASE`] (two
/// stages, the second copying from the first).
fn dockerfile_eval(dir: &std::path::Path) -> Eval {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("Dockerfile"),
        format!(
            "FROM {DOCKERFILE_BASE} AS stage\nRUN echo from-the-stage > /stage.txt\n\
             FROM \\\n  {DOCKERFILE_BASE}\nCOPY --from=stage /stage.txt /stage.txt\n"
        ),
    )
    .unwrap();
    let path = dir.join("Dockerfile");
    Eval::new("dockerfile", |c| {
        Box::pin(async move {
            expect(
                c.exec("test \"$(cat /stage.txt)\" = from-the-stage && command -v python3").await?,
            )
            .to_succeed()?;
            Ok(())
        })
    })
    .environment(move || Environment::new().image(Image::dockerfile(path.clone())))
}

/// `Image::dockerfile` whose `FROM`s name an image that exists nowhere: mapped,
/// the build uses the mapped name (the file on disk unchanged), the record
/// names what was mapped, and the image's tag follows the mapping; unmapped,
/// the same eval is an infra error naming the image.
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_dockerfile_builds_on_its_mapped_from() {
    require_docker!();
    let dir = common::temp_dir("images-dockerfile");
    let on_disk = |d: &std::path::Path| std::fs::read_to_string(d.join("Dockerfile")).unwrap();
    let mut tags = Vec::new();
    // Two spellings of the same base: the same image, two Dockerfile texts, two tags.
    for to in [BASE, "docker.io/reeval/base:latest"] {
        let eval = dockerfile_eval(&dir);
        let before = on_disk(&dir);
        let runner = common::runner_with("images-dockerfile", |c| {
            c.settings.harnesses = vec!["shell".into()];
            c.settings.images =
                ImageMap::new(&[(DOCKERFILE_BASE.to_string(), to.to_string())].into())
                    .expect("the names parse");
        });
        let report = runner.run(vec![eval]).await.expect("preflight passes");
        let rec = &report.records[0];
        assert_eq!(rec.outcome, Outcome::Pass, "{to}: {:?}", rec.message);
        assert_eq!(rec.image_mapped_from.as_deref(), Some(DOCKERFILE_BASE), "{to}");
        let image = rec.phases.iter().find(|p| p.phase == Phase::Image).expect("an image phase");
        assert!(
            image
                .detail
                .contains(&format!("its Dockerfile names {DOCKERFILE_BASE}; [images] maps them")),
            "{}",
            image.detail
        );
        assert_eq!(on_disk(&dir), before, "the user's Dockerfile is not changed");
        tags.push(rec.image.clone().expect("an image"));
    }
    assert_ne!(tags[0], tags[1], "the image's tag changes with the mapping");

    // The control: unmapped, the build looks for the name as written, and it is nowhere.
    let runner = common::runner_with("images-dockerfile-unmapped", |c| {
        c.settings.harnesses = vec!["shell".into()];
    });
    match runner.run(vec![dockerfile_eval(&dir)]).await {
        Ok(report) => {
            let rec = &report.records[0];
            assert_eq!(rec.outcome, Outcome::InfraError, "{:?}", rec.message);
            let message = rec.message.as_deref().unwrap_or("");
            assert!(message.contains(DOCKERFILE_BASE), "{message}");
            assert_eq!(rec.image_mapped_from, None);
        }
        Err(e) => panic!("preflight does not build images: {e}"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Harbor task whose `environment/Dockerfile` names a public image
/// (`ubuntu:24.04`, not on this machine, no registry reachable), in two
/// stages: run with `[images]` mapping it to the local base, the task builds
/// and its verifier's reward is 1.
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_harbor_tasks_dockerfile_builds_on_its_mapped_from() {
    require_docker!();
    let task =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/harbor/images/public-base");
    let evals = reeval::harbor::tasks(&task).expect("the task loads");
    let runner = common::runner_with("images-harbor-dockerfile", |c| {
        c.settings.harnesses = vec!["shell".into()];
        c.settings.images = ImageMap::new(&[("ubuntu:24.04".to_string(), BASE.to_string())].into())
            .expect("the names parse");
    });
    let report = runner.run(evals).await.expect("preflight passes");
    let rec = &report.records[0];
    assert_eq!(rec.outcome, Outcome::Pass, "{:?}", rec.message);
    assert_eq!(rec.reward.as_ref().map(|m| m["reward"]), Some(1.0));
    assert_eq!(rec.image_mapped_from.as_deref(), Some("ubuntu:24.04"));
}
