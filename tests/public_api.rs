//! The facade's public surface, listed: every item a user can name through
//! `reeval::…` (modules, types, traits, functions, constants, macros), one a
//! line, compared with the checked-in `public-api.txt`. A change that adds,
//! moves or drops a public item fails here until the listing is rewritten
//! with `REEVAL_BLESS=1 cargo test --test public_api` and the diff reviewed:
//! the surface does not grow by accident.
//!
//! The listing is read from the source with `syn` (already built for
//! reeval-macros): it follows `pub mod`, `pub use` (renames and globs) and
//! `#[path]` through the workspace's crates, and names what comes from
//! outside the workspace (`serde_json`) without walking into it. It lists
//! items, not their methods or fields; `#[doc(hidden)]` and `#[cfg(test)]`
//! items are left out, and an item behind a feature says which.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use syn::{Attribute, Item, UseTree, Visibility};

const LISTING: &str = "public-api.txt";

/// The workspace's crates the walk may enter, by the name code uses for them.
const CRATES: &[(&str, &str)] = &[
    ("reeval", "src/lib.rs"),
    ("reeval_core", "reeval-core/src/lib.rs"),
    ("reeval_record", "reeval-record/src/lib.rs"),
    ("reeval_sandbox", "reeval-sandbox/src/lib.rs"),
    ("reeval_harness", "reeval-harness/src/lib.rs"),
    ("reeval_harbor", "reeval-harbor/src/lib.rs"),
    ("reeval_macros", "reeval-macros/src/lib.rs"),
    ("reeval_gateway", "reeval-gateway/src/lib.rs"),
];

/// One module: its crate, its path in the crate, its items, and the
/// directory its `mod x;` children are found in.
#[derive(Clone)]
struct Module {
    krate: String,
    path: Vec<String>,
    items: Vec<Item>,
    /// Where `mod x;` looks for x.rs and x/mod.rs.
    dir: PathBuf,
    /// Where `#[path = ".."] mod x;` is relative to (the file's own directory).
    file_dir: PathBuf,
}

/// What a path names.
enum Target {
    Module(Module),
    Item(&'static str, Option<String>),
    /// Outside the workspace: named, not walked.
    External(String),
}

struct Walker {
    root: PathBuf,
    lines: BTreeSet<String>,
    /// Modules listed, with their prefix, so that a re-export loop ends.
    seen: BTreeSet<(String, Vec<String>, String)>,
    cache: HashMap<(String, Vec<String>), Module>,
    /// Lookups under way, so that globs that reach each other (`use super::*`) end.
    looking: BTreeSet<(String, Vec<String>, Vec<String>)>,
}

fn is_pub(vis: &Visibility) -> bool {
    matches!(vis, Visibility::Public(_))
}

fn attr_tokens(attr: &Attribute) -> String {
    quote_free(attr.meta.require_list().map(|l| l.tokens.to_string()).unwrap_or_default())
}

fn quote_free(s: String) -> String {
    s.replace(" = ", "=").replace("\"", "")
}

fn hidden(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        (a.path().is_ident("doc") && attr_tokens(a) == "hidden")
            || (a.path().is_ident("cfg") && attr_tokens(a) == "test")
    })
}

/// The item's `#[cfg(..)]`, as a suffix of its line.
fn cfg_of(attrs: &[Attribute]) -> Option<String> {
    attrs.iter().find(|a| a.path().is_ident("cfg")).map(|a| format!("#[cfg({})]", attr_tokens(a)))
}

fn kind_and_name(item: &Item) -> Option<(&'static str, String, &[Attribute])> {
    Some(match item {
        Item::Fn(f) if is_pub(&f.vis) => {
            let attrs = &f.attrs;
            let kind = if attrs.iter().any(|a| a.path().is_ident("proc_macro_attribute")) {
                "attribute macro"
            } else if attrs.iter().any(|a| a.path().is_ident("proc_macro")) {
                "macro"
            } else {
                "fn"
            };
            (kind, f.sig.ident.to_string(), attrs)
        }
        Item::Struct(s) if is_pub(&s.vis) => ("struct", s.ident.to_string(), &s.attrs),
        Item::Enum(e) if is_pub(&e.vis) => ("enum", e.ident.to_string(), &e.attrs),
        Item::Trait(t) if is_pub(&t.vis) => ("trait", t.ident.to_string(), &t.attrs),
        Item::Type(t) if is_pub(&t.vis) => ("type", t.ident.to_string(), &t.attrs),
        Item::Const(c) if is_pub(&c.vis) => ("const", c.ident.to_string(), &c.attrs),
        Item::Static(s) if is_pub(&s.vis) => ("static", s.ident.to_string(), &s.attrs),
        Item::Union(u) if is_pub(&u.vis) => ("union", u.ident.to_string(), &u.attrs),
        Item::Macro(m)
            if m.ident.is_some() && m.attrs.iter().any(|a| a.path().is_ident("macro_export")) =>
        {
            ("macro", m.ident.as_ref().unwrap().to_string(), &m.attrs)
        }
        _ => return None,
    })
}

/// The `use` tree as (path, name bound or `None` for a glob) pairs.
fn flatten(tree: &UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, Option<String>)>) {
    match tree {
        UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten(&p.tree, prefix, out);
            prefix.pop();
        }
        UseTree::Name(n) if n.ident == "self" => {
            out.push((prefix.clone(), prefix.last().cloned()));
        }
        UseTree::Name(n) => {
            let mut path = prefix.clone();
            path.push(n.ident.to_string());
            out.push((path, Some(n.ident.to_string())));
        }
        UseTree::Rename(r) => {
            let mut path = prefix.clone();
            path.push(r.ident.to_string());
            out.push((path, Some(r.rename.to_string())));
        }
        UseTree::Glob(_) => out.push((prefix.clone(), None)),
        UseTree::Group(g) => g.items.iter().for_each(|t| flatten(t, prefix, out)),
    }
}

impl Walker {
    fn parse(&self, file: &Path) -> Vec<Item> {
        let text = std::fs::read_to_string(file)
            .unwrap_or_else(|e| panic!("failed to read {}: {e}", file.display()));
        syn::parse_file(&text)
            .unwrap_or_else(|e| panic!("failed to parse {}: {e}", file.display()))
            .items
    }

    fn crate_root(&mut self, krate: &str) -> Option<Module> {
        let (_, file) = CRATES.iter().find(|(name, _)| *name == krate)?;
        let file = self.root.join(file);
        let dir = file.parent().unwrap().to_path_buf();
        Some(Module {
            krate: krate.into(),
            path: vec![],
            items: self.parse(&file),
            dir: dir.clone(),
            file_dir: dir,
        })
    }

    /// The child module `name` of `parent`, inline or in its file.
    fn child(&mut self, parent: &Module, name: &str) -> Option<Module> {
        let mut path = parent.path.clone();
        path.push(name.to_string());
        let key = (parent.krate.clone(), path.clone());
        if let Some(m) = self.cache.get(&key) {
            return Some(m.clone());
        }
        let decl = parent.items.iter().find_map(|i| match i {
            Item::Mod(m) if m.ident == name && !hidden_test(&m.attrs) => Some(m),
            _ => None,
        })?;
        let module = if let Some((_, items)) = &decl.content {
            let dir = parent.dir.join(name);
            Module {
                krate: parent.krate.clone(),
                path,
                items: items.clone(),
                dir: dir.clone(),
                file_dir: dir,
            }
        } else {
            let by_attr = decl.attrs.iter().find(|a| a.path().is_ident("path")).map(|a| {
                let syn::Meta::NameValue(nv) = &a.meta else { panic!("#[path] without a value") };
                let syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) = &nv.value else {
                    panic!("#[path] not a string")
                };
                parent.file_dir.join(s.value())
            });
            let file = by_attr.unwrap_or_else(|| {
                let flat = parent.dir.join(format!("{name}.rs"));
                if flat.exists() { flat } else { parent.dir.join(name).join("mod.rs") }
            });
            let file_dir = file.parent().unwrap().to_path_buf();
            let dir = if file.file_name().is_some_and(|f| f == "mod.rs") {
                file_dir.clone()
            } else {
                file_dir.join(file.file_stem().unwrap())
            };
            Module { krate: parent.krate.clone(), path, items: self.parse(&file), dir, file_dir }
        };
        self.cache.insert(key, module.clone());
        Some(module)
    }

    fn module_at(&mut self, krate: &str, path: &[String]) -> Module {
        let mut m = self.crate_root(krate).expect("a workspace crate");
        for name in path {
            m = self
                .child(&m, name)
                .unwrap_or_else(|| panic!("no module {krate}::{}", path.join("::")));
        }
        m
    }

    /// What `segs` names, seen from `from`.
    fn resolve(&mut self, from: &Module, segs: &[String]) -> Target {
        let (first, rest) = segs.split_first().expect("a path");
        let start = match first.as_str() {
            "crate" => self.module_at(&from.krate.clone(), &[]),
            "self" => from.clone(),
            "super" => self.module_at(&from.krate.clone(), &from.path[..from.path.len() - 1]),
            name => match self.crate_root(name) {
                Some(root) => root,
                None => return self.lookup(from, segs),
            },
        };
        if rest.is_empty() { Target::Module(start) } else { self.lookup(&start, rest) }
    }

    /// `segs` looked up in `module`'s own names: its child modules, its items, its `use`s.
    fn lookup(&mut self, module: &Module, segs: &[String]) -> Target {
        let key = (module.krate.clone(), module.path.clone(), segs.to_vec());
        if !self.looking.insert(key.clone()) {
            return Target::External(segs.join("::"));
        }
        let target = self.lookup_once(module, segs);
        self.looking.remove(&key);
        target
    }

    fn lookup_once(&mut self, module: &Module, segs: &[String]) -> Target {
        let (name, rest) = segs.split_first().unwrap();
        if let Some(child) = self.child(module, name) {
            return if rest.is_empty() { Target::Module(child) } else { self.lookup(&child, rest) };
        }
        if rest.is_empty() {
            for item in &module.items {
                if let Some((kind, n, attrs)) = kind_and_name_any(item)
                    && n == *name
                {
                    return Target::Item(kind, cfg_of(attrs));
                }
            }
        }
        let mut globs = Vec::new();
        for item in module.items.clone() {
            let Item::Use(u) = item else { continue };
            let mut pairs = Vec::new();
            flatten(&u.tree, &mut vec![], &mut pairs);
            for (path, bound) in pairs {
                match bound {
                    // `pub use serde_json;`, `pub use async_trait::async_trait;`: a
                    // crate from outside, by its own name.
                    Some(b) if b == *name && path[0] == b && self.crate_root(&b).is_none() => {
                        return Target::External(segs.join("::"));
                    }
                    Some(b) if b == *name => {
                        let target = self.resolve(module, &path);
                        return match (target, rest.is_empty()) {
                            (t, true) => t,
                            (Target::Module(m), false) => self.lookup(&m, rest),
                            (Target::External(e), false) => {
                                Target::External(format!("{e}::{}", rest.join("::")))
                            }
                            (Target::Item(..), false) => {
                                panic!("a path through an item: {}", segs.join("::"))
                            }
                        };
                    }
                    None => globs.push(path),
                    _ => {}
                }
            }
        }
        for glob in globs {
            if let Target::Module(m) = self.resolve(module, &glob)
                && let t @ (Target::Module(_) | Target::Item(..)) = self.lookup(&m, segs)
            {
                return t;
            }
        }
        // Not the workspace's: a crate from outside (serde_json, async_trait, …).
        Target::External(segs.join("::"))
    }

    /// Lists `module`'s public names under `prefix`.
    fn list(&mut self, module: &Module, prefix: &str) {
        if !self.seen.insert((module.krate.clone(), module.path.clone(), prefix.to_string())) {
            return;
        }
        for item in module.items.clone() {
            if let Some((kind, name, attrs)) = kind_and_name(&item) {
                if !hidden(attrs) {
                    self.add(kind, &format!("{prefix}::{name}"), cfg_of(attrs));
                }
                continue;
            }
            match &item {
                Item::Mod(m) if is_pub(&m.vis) && !hidden(&m.attrs) => {
                    let path = format!("{prefix}::{}", m.ident);
                    self.add("mod", &path, cfg_of(&m.attrs));
                    let child =
                        self.child(module, &m.ident.to_string()).expect("a declared module");
                    self.list(&child, &path);
                }
                Item::Use(u) if is_pub(&u.vis) && !hidden(&u.attrs) => {
                    let cfg = cfg_of(&u.attrs);
                    let mut pairs = Vec::new();
                    flatten(&u.tree, &mut vec![], &mut pairs);
                    for (path, bound) in pairs {
                        let target = self.resolve(module, &path);
                        match (target, bound) {
                            (Target::Module(m), None) => self.list(&m, prefix),
                            (Target::Module(m), Some(name)) => {
                                let path = format!("{prefix}::{name}");
                                self.add("mod", &path, cfg.clone());
                                self.list(&m, &path);
                            }
                            (Target::Item(kind, item_cfg), Some(name)) => self.add(
                                kind,
                                &format!("{prefix}::{name}"),
                                cfg.clone().or(item_cfg),
                            ),
                            (Target::External(from), bound) => {
                                let name = bound.unwrap_or_else(|| "*".into());
                                self.add(
                                    "re-export",
                                    &format!("{prefix}::{name} = {from}"),
                                    cfg.clone(),
                                )
                            }
                            (Target::Item(..), None) => {
                                panic!("a glob of an item: {}", path.join("::"))
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn add(&mut self, kind: &str, path: &str, cfg: Option<String>) {
        let line = match cfg {
            Some(cfg) => format!("{kind} {path} {cfg}"),
            None => format!("{kind} {path}"),
        };
        self.lines.insert(line);
    }
}

fn hidden_test(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| a.path().is_ident("cfg") && attr_tokens(a) == "test")
}

/// An item's kind and name whatever its visibility (a re-export names it by path).
fn kind_and_name_any(item: &Item) -> Option<(&'static str, String, &[Attribute])> {
    let mut public = item.clone();
    let vis = Visibility::Public(Default::default());
    match &mut public {
        Item::Fn(f) => f.vis = vis,
        Item::Struct(s) => s.vis = vis,
        Item::Enum(e) => e.vis = vis,
        Item::Trait(t) => t.vis = vis,
        Item::Type(t) => t.vis = vis,
        Item::Const(c) => c.vis = vis,
        Item::Static(s) => s.vis = vis,
        Item::Union(u) => u.vis = vis,
        _ => {}
    }
    let (kind, name, _) = kind_and_name(&public)?;
    Some((kind, name, attrs_of(item)))
}

fn attrs_of(item: &Item) -> &[Attribute] {
    match item {
        Item::Fn(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Const(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        _ => &[],
    }
}

/// The facade's public items, one a line, sorted.
fn listing(root: &Path) -> String {
    let mut walker = Walker {
        root: root.to_path_buf(),
        lines: BTreeSet::new(),
        seen: BTreeSet::new(),
        cache: HashMap::new(),
        looking: BTreeSet::new(),
    };
    let facade = walker.crate_root("reeval").unwrap();
    walker.list(&facade, "reeval");
    let mut text = String::from(
        "# The public items of the `reeval` crate, one a line (tests/public_api.rs;\n\
         # REEVAL_BLESS=1 cargo test --test public_api rewrites it: review the diff).\n",
    );
    for line in &walker.lines {
        text.push_str(line);
        text.push('\n');
    }
    text
}

#[test]
fn the_public_surface_is_the_listed_one() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let now = listing(root);
    let file = root.join(LISTING);
    if std::env::var("REEVAL_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&file, &now).expect("failed to write public-api.txt");
        return;
    }
    let listed = std::fs::read_to_string(&file).unwrap_or_default();
    if listed != now {
        let listed_lines: BTreeSet<&str> = listed.lines().collect();
        let now_lines: BTreeSet<&str> = now.lines().collect();
        let added: Vec<_> = now_lines.difference(&listed_lines).collect();
        let gone: Vec<_> = listed_lines.difference(&now_lines).collect();
        panic!(
            "the public surface changed against {LISTING}:\n  added: {added:#?}\n  gone: {gone:#?}\n\
             (if that is meant, rewrite it with REEVAL_BLESS=1 cargo test --test public_api, and review the diff)"
        );
    }
}

/// The walk itself: a re-export, a rename, a glob and a hidden item, in a
/// crate of its own written here, come out as a user names them.
#[test]
fn the_walk_follows_re_exports_renames_and_globs() {
    let dir = std::env::temp_dir().join(format!("reeval-public-api-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("inner")).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        "pub mod inner;\nmod private;\npub use private::Shown;\npub use inner::deep as renamed;\n\
         pub use private::*;\npub use serde_json;\n#[doc(hidden)]\npub mod hidden {}\n\
         #[macro_export]\nmacro_rules! m { () => {} }\n",
    )
    .unwrap();
    std::fs::write(
        src.join("inner/mod.rs"),
        "pub mod deep { pub fn f() {} }\npub(crate) fn not_listed() {}\n",
    )
    .unwrap();
    std::fs::write(
        src.join("private.rs"),
        "pub struct Shown;\npub enum Globbed {}\n#[cfg(feature = \"x\")]\npub const C: u8 = 0;\n",
    )
    .unwrap();
    let mut walker = Walker {
        root: dir.clone(),
        lines: BTreeSet::new(),
        seen: BTreeSet::new(),
        cache: HashMap::new(),
        looking: BTreeSet::new(),
    };
    let file = src.join("lib.rs");
    let module = Module {
        krate: "synthetic".into(),
        path: vec![],
        items: walker.parse(&file),
        dir: src.clone(),
        file_dir: src,
    };
    walker.list(&module, "x");
    let lines: Vec<&str> = walker.lines.iter().map(String::as_str).collect();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        lines,
        [
            "const x::C #[cfg(feature=x)]",
            "enum x::Globbed",
            "fn x::inner::deep::f",
            "fn x::renamed::f",
            "macro x::m",
            "mod x::inner",
            "mod x::inner::deep",
            "mod x::renamed",
            "re-export x::serde_json = serde_json",
            "struct x::Shown",
        ]
    );
}
