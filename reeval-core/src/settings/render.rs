//! What the option table ([`super::table`]) says to people: the `--help`
//! text and the two tables of docs/options.md (every setting, every flag).
//! A test renders both tables and compares them with the page between its
//! markers, so the page cannot drift from the table; `REEVAL_BLESS=1`
//! rewrites them instead (review the diff).

use super::table::{Group, Kind, OPTIONS, Opt};

const USAGE: &str = "Usage: <suite> [OPTIONS] [FILTERS...] [-- FILTERS...]

Runs the reeval evals of this binary. Filters select evals whose name contains any of them;
after `--` every argument is a filter, even one that starts with `-`. Short flags cluster (-vq)
and a value may follow its flag as `--flag value` or `--flag=value`.";

const EXIT_CODES: &str =
    "Exit code: 0 all passed, 1 any fail, 3 infra errors (or a record that could not be written)
and no fail, 2 config or usage error (also: no eval selected), 130 interrupted.";

/// Where `--help` wraps, and where an option's words start.
const WIDTH: usize = 100;
const HELP_COLUMN: usize = 29;

/// `-v, --verbose`, `--trials <N>`, `-Z <FLAG>` as `--help` writes them.
fn flag_usage(o: &Opt) -> String {
    let short = o.short.map(|s| format!("-{s}"));
    let long = o.long.map(|l| format!("--{l}"));
    let names = [short, long].into_iter().flatten().collect::<Vec<_>>().join(", ");
    match o.value {
        Some(v) => format!("{names} <{v}>"),
        None => names,
    }
}

/// The variable as a twin of the flag: `REEVAL_VERBOSE=1`, `REEVAL_TAGS=a,b`.
fn twin(o: &Opt) -> Option<String> {
    let env = o.env?;
    Some(match o.kind {
        // A switch that turns something off (`--no-setup-cache`) is the variable at 0.
        Kind::YesNo if o.long.is_some_and(|l| l.starts_with("no-")) => format!("{env}=0"),
        Kind::YesNo => format!("{env}=1"),
        Kind::List(_) | Kind::OneOrList(..) => format!("{env}=a,b"),
        _ => env.to_string(),
    })
}

/// Markdown links (`[Engines][engines]`) as their words, for the terminal.
fn plain(text: &str) -> String {
    let link = regex::Regex::new(r"\[([^\]]+)\]\[[^\]]*\]").expect("a valid pattern");
    link.replace_all(text, "$1").into_owned()
}

/// `left` padded to the help column, then `words` wrapped under it.
fn entry(left: &str, words: &str) -> String {
    wrapped(&format!("{left:<width$}", width = HELP_COLUMN - 1), HELP_COLUMN - 1, words)
}

/// `first`, then `words` wrapped at [`WIDTH`], lines after the first indented by `indent`.
fn wrapped(first: &str, indent: usize, words: &str) -> String {
    let mut out = String::new();
    let mut line = first.to_string();
    for word in words.split_whitespace() {
        if line.chars().count() + 1 + word.chars().count() > WIDTH && line.len() > first.len() {
            out.push_str(line.trim_end());
            out.push('\n');
            line = " ".repeat(indent);
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(line.trim_end());
    out
}

/// The `--help` text.
pub fn help() -> String {
    let in_group = |g: Group| OPTIONS.iter().filter(move |o| o.group == g);
    let flag_line = |o: &Opt| {
        let left = if o.short.is_some() && o.long.is_some() {
            format!("  {}", flag_usage(o))
        } else {
            format!("      {}", flag_usage(o))
        };
        let words = match twin(o) {
            Some(t) => format!("{}  ({t})", o.help),
            None => o.help.to_string(),
        };
        entry(&left, &words)
    };
    let mut out = vec![USAGE.to_string(), String::new()];
    out.push("libtest options (so cargo test and cargo-nextest can drive the suite):".into());
    out.extend(in_group(Group::Libtest).map(flag_line));
    let accepted = in_group(Group::Accepted).map(flag_usage).collect::<Vec<_>>().join(", ");
    out.push(wrapped("     ", 5, &format!("{accepted}: accepted")));
    out.push(String::new());
    out.push("reeval options (env twins for cargo-nextest):".into());
    out.extend(in_group(Group::Reeval).map(flag_line));
    out.push(entry("  -h, --help", "this text"));
    out.push(String::new());
    out.push("Settings without a flag (a variable, a reeval.toml key, or both):".into());
    out.extend(in_group(Group::NoFlag).map(|o| {
        let (left, key) = match (o.env, o.key, o.kind) {
            (_, _, Kind::Table(shape)) => (shape.to_string(), String::new()),
            (Some(env), Some(key), _) => (env.to_string(), format!("reeval.toml: {key}; ")),
            (Some(env), None, _) => (env.to_string(), String::new()),
            (None, key, _) => (key.unwrap_or_default().to_string(), String::new()),
        };
        entry(
            &format!("      {left}"),
            &plain(&format!("{} ({key}default: {})", o.help, o.default)),
        )
    }));
    out.push(String::new());
    out.push(EXIT_CODES.to_string());
    out.join("\n")
}

/// A table row of `cells`, each with `|` escaped.
fn row(cells: &[&str]) -> String {
    let cells: Vec<String> = cells
        .iter()
        .map(|c| if c.is_empty() { " |".into() } else { format!(" {} |", c.replace('|', "\\|")) })
        .collect();
    format!("|{}", cells.concat())
}

/// `` `-v`, `--verbose` ``, `` `--trials N` `` as the documentation writes them.
fn flag_doc(o: &Opt) -> String {
    let value = o.value.map(|v| format!(" {v}")).unwrap_or_default();
    let short = o.short.map(|s| format!("-{s}"));
    let long = o.long.map(|l| format!("--{l}"));
    let names: Vec<String> = [short, long].into_iter().flatten().collect();
    match names.split_last() {
        Some((last, rest)) => {
            let mut all: Vec<String> = rest.iter().map(|n| format!("`{n}`")).collect();
            all.push(format!("`{last}{value}`"));
            all.join(", ")
        }
        None => String::new(),
    }
}

/// The table of every setting: each option with a variable or a `reeval.toml` key.
pub fn settings_table() -> String {
    let mut rows = vec![
        "| setting | flag | environment | `reeval.toml` | default |".to_string(),
        "|---|---|---|---|---|".to_string(),
    ];
    for o in OPTIONS.iter().filter(|o| o.env.is_some() || o.key.is_some()) {
        let env = o.env.map(|env| {
            let described = match o.kind {
                Kind::YesNo => format!("`{env}` (a yes/no word)"),
                Kind::List(_) | Kind::OneOrList(..) => format!("`{env}=a,b`"),
                Kind::Bytes => format!("`{env}` (bytes, or with `KiB`, `MiB`, `GiB`)"),
                Kind::Word(words) => format!("`{env}` (`{}`)", words.join("`, `")),
                Kind::Presence => format!("`{env}` set"),
                _ => format!("`{env}`"),
            };
            format!("{described}{}", o.env_note)
        });
        let key = match (o.key, o.kind) {
            (Some(_), Kind::Table(shape)) => format!("`{shape}`"),
            (Some(key), _) => format!("`{key}`"),
            (None, _) => String::new(),
        };
        let env = env.unwrap_or_default();
        rows.push(row(&[o.name, &flag_doc(o), &env, &key, o.default]));
    }
    rows.join("\n")
}

/// The table of every flag (libtest's ignored ones aside), with its twin and what it does.
pub fn flags_table() -> String {
    let mut rows =
        vec!["| flag | environment | what it does |".to_string(), "|---|---|---|".to_string()];
    let flagged = OPTIONS.iter().filter(|o| o.has_flag() && o.group != Group::Accepted);
    for o in flagged {
        let twin = twin(o).map(|t| format!("`{t}`")).unwrap_or_default();
        // `more` goes on the help's sentence: after a space, or straight after its `;`.
        let space = if o.more.starts_with([';', ',']) || o.more.is_empty() { "" } else { " " };
        let words = format!("{}{space}{}", o.help, o.more);
        rows.push(row(&[&flag_doc(o), &twin, &words]));
    }
    rows.join("\n")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// The page, and the markers each generated table sits between.
    const DOC: &str = "../docs/options.md";
    /// A table's start marker, end marker and what renders it.
    type Marked = (&'static str, &'static str, fn() -> String);
    const TABLES: [Marked; 2] = [
        ("<!-- options:settings:start -->", "<!-- options:settings:end -->", settings_table),
        ("<!-- options:flags:start -->", "<!-- options:flags:end -->", flags_table),
    ];

    #[test]
    fn the_options_page_shows_the_table() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(DOC);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("failed to read {}: {e}", path.display()));
        let mut want = text.clone();
        for (start, end, render) in TABLES {
            let (head, rest) = want.split_once(start).expect("the page has the start marker");
            let (_, tail) = rest.split_once(end).expect("the page has the end marker");
            want = format!("{head}{start}\n{}\n{end}{tail}", render());
        }
        if want == text {
            return;
        }
        if std::env::var("REEVAL_BLESS").is_ok_and(|v| v == "1") {
            std::fs::write(&path, want).expect("rewrite docs/options.md");
            return;
        }
        let differs = want.lines().zip(text.lines()).find(|(w, h)| w != h);
        panic!(
            "{DOC} does not show the option table (settings/table.rs); first difference:\n  page:  {}\n  table: {}\n(run with REEVAL_BLESS=1 to rewrite the page's tables, and review the diff)",
            differs.map_or("<shorter or longer>", |d| d.1),
            differs.map_or("", |d| d.0),
        );
    }

    #[test]
    fn help_lists_every_flag_and_variable() {
        let help = help();
        for o in OPTIONS {
            let name = o.long.map(|l| format!("--{l}")).or(o.env.map(str::to_string));
            if let Some(name) = name {
                assert!(help.contains(&name), "--help lacks {name}");
            }
        }
        assert!(help.lines().all(|l| l.chars().count() <= WIDTH), "{help}");
        assert!(help.contains("  -v, --verbose              print every phase"), "{help}");
        assert!(help.contains("(REEVAL_SETUP_CACHE=0)"), "{help}");
    }
}
