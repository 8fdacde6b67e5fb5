// The reeval book: the reference, one page per topic.
//
// These pages are the markdown files of `docs/` in the repository, included
// here so that they read as documentation and their Rust examples compile
// as doctests (`cargo test --doc -p reeval`). Their links are defined twice:
// at the foot of each file for GitHub, and in `src/book/links.md` as
// intra-doc paths, which come first and so win here
// (`scripts/book-links.py` writes both).
#![doc = include_str!("book/links.md")]
#![doc = include_str!("../docs/README.md")]

/// Declares a page: a module whose documentation is the file `docs/<file>`.
macro_rules! page {
    ($(#[$attr:meta])* $name:ident, $file:literal) => {
        $(#[$attr])*
        #[doc = include_str!("book/links.md")]
        #[doc = include_str!(concat!("../docs/", $file))]
        pub mod $name {}
    };
}

page!(getting_started, "getting-started.md");
page!(writing_evals, "writing-evals.md");
page!(environment, "environment.md");
page!(harnesses, "harnesses.md");
page!(options, "options.md");
page!(outcomes, "outcomes.md");
page!(faults, "faults.md");
page!(records, "records.md");
page!(compare, "compare.md");
page!(harbor, "harbor.md");
page!(cli, "cli.md");
page!(security, "security.md");
page!(egress, "egress.md");
page!(engines, "engines.md");
page!(kubernetes, "kubernetes.md");
page!(performance, "performance.md");
page!(limitations, "limitations.md");
page!(layout, "layout.md");
page!(testing, "testing.md");

/// The README, compiled as doctests only (its links point into `docs/`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct Readme;
