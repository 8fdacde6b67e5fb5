//! A Harbor `registry.json` (`models/registry.py`): a list of datasets, each
//! a name, a version and its tasks, every task a `git_url` at a
//! `git_commit_id` with a `path` inside it, or a local `path`. `-d
//! NAME[@VERSION]` picks one dataset of it ([`Registry::dataset`]); its tasks
//! are fetched by [`crate::fetch`].

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::error::DatasetError;

/// One dataset of a registry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DatasetSpec {
    /// Its name (`terminal-bench`).
    pub name: String,
    /// Its version (`2.0`, `head`).
    pub version: String,
    /// What it is.
    #[serde(default)]
    pub description: String,
    /// Its tasks, in order.
    pub tasks: Vec<RegistryTask>,
}

/// One task of a registry dataset (Harbor's `RegistryTaskId`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RegistryTask {
    /// Its name in the registry.
    pub name: String,
    /// The repository holding it; none: `path` is a directory on this machine.
    #[serde(default)]
    pub git_url: Option<String>,
    /// The commit to take it at; none: the repository's HEAD.
    #[serde(default)]
    pub git_commit_id: Option<String>,
    /// Its directory in the repository (or on this machine).
    pub path: PathBuf,
}

impl RegistryTask {
    /// The name Harbor's filters (`-i`, `-x`) match: the last part of its path.
    pub fn dir_name(&self) -> String {
        self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    }
}

/// A registry read.
#[derive(Debug, Clone, PartialEq)]
pub struct Registry {
    /// Its datasets, as listed.
    pub datasets: Vec<DatasetSpec>,
    /// Where it came from (a path or a URL), for messages.
    pub origin: String,
    /// The directory a local task's relative path is looked up in first (the
    /// registry file's), for a registry read from disk.
    pub base: Option<PathBuf>,
}

impl Registry {
    /// `registry.json` read as Harbor reads it; `origin` names it in errors.
    ///
    /// # Errors
    /// [`DatasetError::Registry`] when it is not a JSON list of datasets.
    pub fn parse(text: &str, origin: &str, base: Option<PathBuf>) -> Result<Self, DatasetError> {
        let datasets = serde_json::from_str(text).map_err(|e| DatasetError::Registry {
            origin: origin.to_string(),
            message: format!("it is not a list of datasets: {e}"),
        })?;
        Ok(Registry { datasets, origin: origin.to_string(), base })
    }

    /// `--registry-path`: a `registry.json`, or the directory holding one.
    ///
    /// # Errors
    /// [`DatasetError::Registry`] when it cannot be read or parsed.
    pub fn read(path: &Path) -> Result<Self, DatasetError> {
        let file = if path.is_dir() { path.join("registry.json") } else { path.to_path_buf() };
        let origin = file.display().to_string();
        let text = std::fs::read_to_string(&file).map_err(|e| DatasetError::Registry {
            origin: origin.clone(),
            message: e.to_string(),
        })?;
        let base = file.parent().map(|p| if p.as_os_str().is_empty() { Path::new(".") } else { p });
        Self::parse(&text, &origin, base.map(Path::to_path_buf))
    }

    /// `--registry-url`: the registry fetched over HTTP(S).
    ///
    /// # Errors
    /// [`DatasetError::Registry`] when the request fails, the server answers
    /// other than 2xx, or the body is not a registry. Cancelling it drops the request.
    pub async fn fetch(url: &str) -> Result<Self, DatasetError> {
        let fail = |message: String| DatasetError::Registry { origin: url.to_string(), message };
        let response = reqwest::Client::new()
            .get(url)
            .timeout(std::time::Duration::from_secs(60))
            .send()
            .await
            .map_err(|e| fail(e.to_string()))?;
        let status = response.status();
        if !status.is_success() {
            return Err(fail(format!("the server answered {status}")));
        }
        let text = response.text().await.map_err(|e| fail(e.to_string()))?;
        Self::parse(&text, url, None)
    }

    /// The dataset `name` at `version`, else at the version Harbor resolves
    /// (`head`, else the highest PEP 440 version, else the lexically last).
    ///
    /// # Errors
    /// [`DatasetError::UnknownDataset`] (with the nearest name) or
    /// [`DatasetError::UnknownVersion`] (with the versions it has).
    pub fn dataset(&self, name: &str, version: Option<&str>) -> Result<&DatasetSpec, DatasetError> {
        let of_name: Vec<&DatasetSpec> = self.datasets.iter().filter(|d| d.name == name).collect();
        if of_name.is_empty() {
            let mut names: Vec<&str> = self.datasets.iter().map(|d| d.name.as_str()).collect();
            names.sort_unstable();
            names.dedup();
            let near = reeval_core::suggest::nearest(name, names.iter().copied())
                .map(|n| format!("did you mean `{n}`? "))
                .unwrap_or_default();
            let listed = if names.is_empty() { "none".to_string() } else { names.join(", ") };
            return Err(DatasetError::UnknownDataset {
                name: name.to_string(),
                origin: self.origin.clone(),
                hint: format!("{near}it lists: {listed}"),
            });
        }
        let versions: Vec<&str> = of_name.iter().map(|d| d.version.as_str()).collect();
        let wanted = match version {
            Some(v) => v.to_string(),
            None => super::version::resolve(&versions).unwrap_or_default(),
        };
        // Harbor keeps the last row of a name and version listed twice.
        of_name.iter().rev().find(|d| d.version == wanted).copied().ok_or_else(|| {
            DatasetError::UnknownVersion {
                name: name.to_string(),
                version: wanted,
                origin: self.origin.clone(),
                versions: versions.join(", "),
            }
        })
    }
}

/// `NAME@VERSION` → (`NAME`, `VERSION`); `NAME` → (`NAME`, none).
pub fn split_name_version(spec: &str) -> (&str, Option<&str>) {
    match spec.split_once('@') {
        Some((name, version)) => (name, Some(version)),
        None => (spec, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_VERSIONS: &str = r#"[
        {"name": "bench", "version": "1.0", "description": "", "tasks": [
            {"name": "a", "git_url": "https://example.com/r.git", "git_commit_id": "abc", "path": "tasks/a"}]},
        {"name": "bench", "version": "1.10", "description": "", "tasks": [
            {"name": "a", "path": "local/a"}, {"name": "b", "path": "/abs/b"}]},
        {"name": "other", "version": "head", "tasks": []}
    ]"#;

    #[test]
    fn a_name_alone_takes_the_version_harbor_resolves() {
        let r = Registry::parse(TWO_VERSIONS, "r.json", None).unwrap();
        assert_eq!(r.dataset("bench", None).unwrap().version, "1.10", "PEP 440: 1.10 > 1.0");
        assert_eq!(
            r.dataset("bench", Some("1.0")).unwrap().tasks[0].git_commit_id.as_deref(),
            Some("abc")
        );
        assert_eq!(r.dataset("other", None).unwrap().version, "head");
        assert_eq!(r.dataset("bench", None).unwrap().tasks[1].dir_name(), "b");
    }

    /// A loopback server answering one request with `status` and `body`; its URL.
    fn serve_once(status: &'static str, body: &'static str) -> String {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/registry.json", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut request = [0u8; 4096];
            let _ = conn.read(&mut request);
            let reply = format!(
                "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            conn.write_all(reply.as_bytes()).unwrap();
        });
        url
    }

    #[tokio::test]
    async fn a_registry_is_fetched_by_its_url() {
        let url = serve_once("200 OK", TWO_VERSIONS);
        let r = Registry::fetch(&url).await.unwrap();
        assert_eq!((r.datasets.len(), r.origin.as_str(), r.base.as_ref()), (3, url.as_str(), None));
        let url = serve_once("404 Not Found", "no");
        let e = Registry::fetch(&url).await.unwrap_err().to_string();
        assert!(e.contains("the server answered 404 Not Found"), "{e}");
    }

    #[test]
    fn unknown_names_and_versions_say_what_there_is() {
        let r = Registry::parse(TWO_VERSIONS, "r.json", None).unwrap();
        let e = r.dataset("bnech", None).unwrap_err().to_string();
        assert!(e.contains("did you mean `bench`? it lists: bench, other"), "{e}");
        let e = r.dataset("bench", Some("3.0")).unwrap_err().to_string();
        assert!(e.contains("version `3.0`") && e.contains("it has 1.0, 1.10"), "{e}");
        let e = Registry::parse("{}", "r.json", None).unwrap_err().to_string();
        assert!(
            e.starts_with("failed to read the Harbor registry r.json: it is not a list"),
            "{e}"
        );
        assert_eq!(split_name_version("bench@2.0"), ("bench", Some("2.0")));
        assert_eq!(split_name_version("bench"), ("bench", None));
    }
}
