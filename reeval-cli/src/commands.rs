//! The commands of `reeval`, each reading or changing one thing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use reeval_core::bollard::query_parameters::{ListImagesOptionsBuilder, RemoveImageOptionsBuilder};
use reeval_core::environment::ImageSpec;
use reeval_core::sandbox::{Backend, DockerBackend, Sweep};

/// A command that failed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// A run directory could not be read or written.
    #[error(transparent)]
    Runs(#[from] reeval_core::runs::RunsError),
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] reeval_core::SandboxError),
    /// The engine's API failed.
    #[error("failed to {action}: {source}")]
    Api {
        /// What was being done.
        action: String,
        /// The engine client's error.
        #[source]
        source: reeval_core::bollard::errors::Error,
    },
}

/// `$REEVAL_RECORD_DIR`, else the runner's default.
pub fn record_dir() -> PathBuf {
    std::env::var_os("REEVAL_RECORD_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(reeval_core::runner::default_record_dir)
}

/// `reeval report [DIR]`.
pub fn report(record_dir: &Path, dir: Option<PathBuf>) -> Result<(), CommandError> {
    let dir = match dir {
        Some(d) => d,
        None => reeval_core::runs::latest(record_dir)?.path,
    };
    // Records are written redacted; nothing more to redact here.
    let redactor = reeval_core::secrets::Redactor::new(Vec::<&str>::new());
    let report =
        reeval_core::runs::rebuild(&dir, &reeval_core::prices::PriceTable::default(), &redactor)?;
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
        dir.join("summary.json").display(),
        dir.join("report.html").display()
    );
    Ok(())
}

/// `reeval runs`.
pub fn runs(record_dir: &Path) -> Result<(), CommandError> {
    let runs = reeval_core::runs::list(record_dir)?;
    if runs.is_empty() {
        println!("no runs recorded in {}", record_dir.display());
        return Ok(());
    }
    println!(
        "{:<40} {:<20} {:>8} {:>6} {:>6} {:>6} {:>5}",
        "run", "when", "attempts", "pass", "fail", "infra", "exit"
    );
    for run in runs {
        let records = reeval_core::runs::records(&run.path)?;
        let s = reeval_core::runner::summarize(&run.id, &records);
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
) -> Result<Vec<reeval_core::bollard::models::ImageSummary>, CommandError> {
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
    let (cached, kept) = reeval_core::setup_cache::prune(docker.client(), run).await?;
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
    let docker = DockerBackend::connect().await?;
    let n = docker.sweep(Sweep::Orphans).await?;
    println!("removed {n} leftover {}", if n == 1 { "sandbox" } else { "sandboxes" });
    Ok(())
}
