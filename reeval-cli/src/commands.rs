//! The commands of `reeval`, each reading or changing one thing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use bollard::query_parameters::{ListImagesOptionsBuilder, RemoveImageOptionsBuilder};
use reeval_core::environment::ImageSpec;
use reeval_core::sandbox::{Backend, DockerBackend, Sweep};

/// A command that failed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// A run directory could not be read or written.
    #[error(transparent)]
    Runs(#[from] reeval_core::report::runs::RunsError),
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] reeval_core::SandboxError),
    /// A file could not be written.
    #[error("failed to write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The settings' backend (`reeval.toml`, `REEVAL_BACKEND`) could not be used.
    #[error("failed to use the backend the settings choose: {0}")]
    Backend(String),
    /// The comparison's page could not be rendered, or a run cannot be regraded.
    #[error("{0}")]
    Render(String),
    /// The suite binary could not be started.
    #[error("failed to start {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The engine's API failed.
    #[error("failed to {action}: {source}")]
    Api {
        /// What was being done.
        action: String,
        /// The engine client's error.
        #[source]
        source: bollard::errors::Error,
    },
}

/// `$REEVAL_RECORD_DIR`, else the runner's default.
pub fn record_dir() -> PathBuf {
    std::env::var_os("REEVAL_RECORD_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(reeval_core::runner::default_record_dir)
}

/// A run named on the command line: a directory, else a run id under `record_dir`.
fn run_dir(record_dir: &Path, run: &str) -> PathBuf {
    let path = PathBuf::from(run);
    if path.is_dir() { path } else { record_dir.join(run) }
}

/// The runs of one arm of `reeval compare`: a run, or several joined by commas.
fn arm_dirs(record_dir: &Path, arm: &str) -> Vec<PathBuf> {
    arm.split(',').filter(|r| !r.is_empty()).map(|r| run_dir(record_dir, r)).collect()
}

/// `reeval compare RUN_A RUN_B [--out FILE]`: prints the comparison's table
/// and writes its HTML page (default `<record dir>/compare.<A>.vs.<B>.html`)
/// and its figures as JSON beside it. Each arm is a run, or several joined
/// by commas (`A1,A2`: the parts of a partitioned run), read as one.
pub fn compare(
    record_dir: &Path,
    control: &str,
    treatment: &str,
    out: Option<PathBuf>,
) -> Result<(), CommandError> {
    let (a, b) = (arm_dirs(record_dir, control), arm_dirs(record_dir, treatment));
    let compared = reeval_core::compare::recorded::compare_runs(
        &a,
        &b,
        &reeval_core::prices::PriceTable::default(),
    )?;
    let c = &compared.comparison;
    print!("{}", reeval_core::report::compare::table(c));
    let html = out.unwrap_or_else(|| {
        let name = |dirs: &[PathBuf]| {
            reeval_core::record::sanitize(&reeval_core::compare::recorded::arm_name(dirs))
        };
        record_dir.join(format!("compare.{}.vs.{}.html", name(&a), name(&b)))
    });
    if let Some(parent) = html.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|source| CommandError::Write { path: parent.to_path_buf(), source })?;
    }
    let page = reeval_core::report::compare::html(&compared)
        .map_err(|e| CommandError::Render(format!("failed to render the comparison page: {e}")))?;
    std::fs::write(&html, page)
        .map_err(|source| CommandError::Write { path: html.clone(), source })?;
    let json = html.with_extension("json");
    let text = serde_json::to_vec_pretty(c).expect("a comparison serializes");
    std::fs::write(&json, text)
        .map_err(|source| CommandError::Write { path: json.clone(), source })?;
    println!("wrote {} and {}", html.display(), json.display());
    Ok(())
}

/// `reeval regrade RUN`: runs the suite binary that recorded RUN (its
/// summary's command line) again with `--regrade RUN`; its exit code.
pub fn regrade(record_dir: &Path, run: &str) -> Result<i32, CommandError> {
    let dir = run_dir(record_dir, run);
    let summaries = reeval_core::report::runs::summaries(&dir)?;
    let Some(program) = summaries.iter().find_map(|s| s.provenance.command.first().cloned()) else {
        return Err(CommandError::Render(format!(
            "failed to regrade {}: its summary names no suite binary; run the suite with --regrade {}",
            dir.display(),
            dir.display()
        )));
    };
    let status = std::process::Command::new(&program)
        .arg("--regrade")
        .arg(&dir)
        .arg("--record-dir")
        .arg(record_dir)
        .status()
        .map_err(|source| CommandError::Spawn { program: program.clone(), source })?;
    Ok(status.code().unwrap_or(1))
}

/// `reeval report [RUN...] [--out DIR]`: one run's summary and report
/// rebuilt in place (default: the last run); several runs (the parts of a
/// partitioned run) combined into one run directory, `out` (default
/// `<record dir>/<RUN>+<RUN>+…`; see [`reeval_core::report::combine`]).
pub fn report(
    record_dir: &Path,
    runs: &[String],
    out: Option<PathBuf>,
) -> Result<(), CommandError> {
    let prices = reeval_core::prices::PriceTable::default();
    // Records are written redacted; nothing more to redact here.
    let redactor = reeval_core::secrets::Redactor::new(Vec::<&str>::new());
    let dirs: Vec<PathBuf> = runs.iter().map(|r| run_dir(record_dir, r)).collect();
    let report = match (dirs.as_slice(), out) {
        ([], None) => {
            let dir = reeval_core::report::runs::latest(record_dir)?.path;
            reeval_core::report::runs::rebuild(&dir, &prices, &redactor)?
        }
        ([dir], None) => reeval_core::report::runs::rebuild(dir, &prices, &redactor)?,
        (_, out) => {
            let dirs = if dirs.is_empty() {
                vec![reeval_core::report::runs::latest(record_dir)?.path]
            } else {
                dirs
            };
            let out = out.unwrap_or_else(|| {
                reeval_core::report::combine::default_combined_dir(record_dir, &dirs)
            });
            let combined = reeval_core::report::combine::combine(&dirs, &out, &prices, &redactor)?;
            for warning in &combined.warnings {
                eprintln!("warning: {warning}");
            }
            println!("combined {} runs into {}", dirs.len(), out.display());
            combined.report
        }
    };
    let s = &report.summary;
    println!(
        "{}: {} records, {} passed, {} failed, {} infra errors; exit {} ({})",
        report.run_id,
        report.records.len(),
        s.passed,
        s.failed.values().sum::<u32>(),
        s.infra,
        s.exit_code,
        s.exit_reason
    );
    println!(
        "wrote {} and {}",
        report.run_dir.join("summary.json").display(),
        report.run_dir.join("report.html").display()
    );
    Ok(())
}

/// `reeval runs`.
pub fn runs(record_dir: &Path) -> Result<(), CommandError> {
    let runs = reeval_core::report::runs::list(record_dir)?;
    if runs.is_empty() {
        println!("no runs recorded in {}", record_dir.display());
        return Ok(());
    }
    println!(
        "{:<40} {:<20} {:>8} {:>6} {:>6} {:>6} {:>5}",
        "run", "when", "attempts", "pass", "fail", "infra", "exit"
    );
    for run in runs {
        let records = reeval_core::report::runs::records(&run.path)?;
        let s = reeval_core::report::summarize(&run.id, &records);
        let when = humantime::format_rfc3339_seconds(run.modified).to_string();
        println!(
            "{:<40} {:<20} {:>8} {:>6} {:>6} {:>6} {:>5}",
            run.id,
            when,
            records.len(),
            s.passed,
            s.failed.values().sum::<u32>(),
            s.infra,
            s.exit_code
        );
    }
    Ok(())
}

/// reeval's images on the engine: `reeval/base` and the digest-tagged builds.
async fn reeval_images(
    docker: &DockerBackend,
) -> Result<Vec<bollard::models::ImageSummary>, CommandError> {
    let filters = HashMap::from([("reference", vec!["reeval/*"])]);
    let options = ListImagesOptionsBuilder::default().filters(&filters).build();
    docker
        .client()
        .list_images(Some(options))
        .await
        .map_err(|source| CommandError::Api { action: "list images".into(), source })
}

/// `reeval images [list]`.
pub async fn images_list() -> Result<(), CommandError> {
    let docker = DockerBackend::connect().await?;
    let images = reeval_images(&docker).await?;
    if images.is_empty() {
        println!("no reeval images (build reeval/base with scripts/build-base-image.sh)");
    }
    for image in images {
        let created =
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(image.created.max(0) as u64);
        println!(
            "{:<32} {:<20} {:>8.1} MiB  {}",
            image.repo_tags.join(", "),
            image.id.trim_start_matches("sha256:").chars().take(12).collect::<String>(),
            image.size as f64 / (1 << 20) as f64,
            humantime::format_rfc3339_seconds(created)
        );
    }
    Ok(())
}

/// `reeval images build PATH`.
pub async fn images_build(dockerfile: &Path) -> Result<(), CommandError> {
    let docker = DockerBackend::connect().await?;
    let image = docker.ensure_image(&ImageSpec::Dockerfile(dockerfile.to_path_buf()), "").await?;
    println!("{} ({})", image.reference, image.detail);
    Ok(())
}

/// `reeval images prune [--run RUN_ID]`: the digest-tagged builds and the
/// setup cache; `reeval/base` stays. With a run, only the setup images it made.
pub async fn images_prune(run: Option<&str>) -> Result<(), CommandError> {
    let docker = DockerBackend::connect().await?;
    let (cached, kept) = reeval_core::setup_cache::prune(&docker, run).await?;
    for tag in &cached {
        println!("removed {tag}");
    }
    for (tag, why) in &kept {
        eprintln!("kept {tag}: {why}");
    }
    let mut removed = cached.len();
    if run.is_some() {
        println!("{removed} images removed");
        return Ok(());
    }
    for image in reeval_images(&docker).await? {
        for tag in image.repo_tags.iter().filter(|t| t.starts_with("reeval/img:")) {
            let options = RemoveImageOptionsBuilder::default().build();
            match docker.client().remove_image(tag, Some(options), None).await {
                Ok(_) => {
                    println!("removed {tag}");
                    removed += 1;
                }
                // An image a container still uses stays; say so and go on.
                Err(e) => eprintln!("kept {tag}: {e}"),
            }
        }
    }
    println!("{removed} images removed");
    Ok(())
}

/// `reeval clean`.
pub async fn clean() -> Result<(), CommandError> {
    // The backend runs use (`reeval.toml`, `REEVAL_BACKEND`, `DOCKER_HOST`, a pool's engines).
    let settings = reeval_core::settings::Settings::load(
        &Default::default(),
        reeval_core::settings::process_env,
    )
    .map_err(|e| CommandError::Backend(e.to_string()))?;
    let engines = settings
        .backend
        .connect()
        .await
        .map_err(|problems| CommandError::Backend(problems.join("; ")))?;
    let mut n = 0;
    for engine in &engines {
        n += engine.backend.sweep(Sweep::Orphans).await?;
    }
    println!("removed {n} leftover {}", if n == 1 { "sandbox" } else { "sandboxes" });
    Ok(())
}
