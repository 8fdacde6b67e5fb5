//! The real CLIs' test images, as `scripts/fetch-real-clis.sh` prints their
//! tags (it fetches each CLI once per version and builds its image on the base
//! image; a no-op when they are cached). Shared by tests/real_clis.rs,
//! tests/real_mini_swe.rs (through `real_cli`) and benches/real_clis.rs.

use std::sync::OnceLock;

/// The test images' tags.
pub struct Images {
    pub claude: String,
    pub codex: String,
    pub mini_swe: String,
}

/// The tags, from one run of the fetch script per process.
pub fn images() -> &'static Images {
    static IMAGES: OnceLock<Images> = OnceLock::new();
    IMAGES.get_or_init(|| {
        let root = env!("CARGO_MANIFEST_DIR");
        let out = std::process::Command::new(format!("{root}/scripts/fetch-real-clis.sh"))
            .output()
            .expect("run scripts/fetch-real-clis.sh");
        assert!(
            out.status.success(),
            "scripts/fetch-real-clis.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let tags = String::from_utf8_lossy(&out.stdout);
        let tag = |prefix: &str| {
            tags.lines()
                .find(|l| l.starts_with(prefix))
                .unwrap_or_else(|| panic!("no {prefix} image in {tags:?}"))
                .to_string()
        };
        Images {
            claude: tag("reeval/real-claude-code:"),
            codex: tag("reeval/real-codex:"),
            mini_swe: tag("reeval/real-mini-swe-agent:"),
        }
    })
}
