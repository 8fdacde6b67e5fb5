//! The macro the option table is written in ([`options!`]): from the one
//! list of options it makes each option's [`Opt`](super::opt::Opt) const,
//! `OPTIONS` (in the list's order), what each flag sets, and the structs a
//! setting lives in: [`Layer`](super::Layer) (what one source sets: the
//! flags, the variables or `reeval.toml`), [`Args`](super::Args) (the
//! command line) and [`Settings`](super::Settings) (every setting, merged),
//! with the merge of the settings that need no hand-written step.
//!
//! A row of the table:
//!
//! ```text
//! /// Doc of the const and of each field it makes.
//! NAME [arg_field: Type]       // a field of `Args` only (a flag that is no setting)
//!      (layer_field: Type)     // a field of `Layer` only: merged by hand (mod.rs)
//!      field: Type [= default] // a setting: `Layer`, `Settings` (`Option<Type>`
//!                              // without a default) and the merge
//!      => Opt::new(…)…         // its name, flag, variable, key, kind, default words, help
//!      [, sets |args, given| …] // what its flag does, when not the field's own
//!      ;
//! ```
//!
//! Each of the three field clauses is optional; a row has at most one. A
//! row's doc is one line (macro_rules cannot repeat a row's lines inside
//! each field it makes).
//! Defaults may read the environment by the name given after `defaults`.

/// `Option<T>` for a setting without a default, `T` with one.
macro_rules! setting_type {
    ($t:ty) => { Option<$t> };
    ($t:ty, $d:expr) => { $t };
}

/// `None` for a setting without a default, the default with one.
macro_rules! setting_default {
    () => {
        None
    };
    ($d:expr) => {
        $d
    };
}

/// The first setter given (a row's own `sets`, else its field's).
pub(crate) const fn first<T: Copy>(setters: &[Option<T>]) -> Option<T> {
    let mut i = 0;
    while i < setters.len() {
        if let Some(set) = setters[i] {
            return Some(set);
        }
        i += 1;
    }
    None
}

macro_rules! options {
    (
        defaults($env:ident);
        by_hand { $( $(#[$bmeta:meta])* pub $bfield:ident : $bty:ty = $bdefault:expr, )* }
        $(
            #[$meta:meta]
            $name:ident
            $( [$afield:ident : $aty:ty] )?
            $( ($lfield:ident : $lty:ty) )?
            $( $field:ident : $ty:ty $( = $default:expr )? )?
            => $opt:expr
            $( , sets $set:expr )?
            ;
        )*
    ) => {
        $( #[$meta] pub(crate) const $name: Opt = $opt; )*

        /// What a flag's option sets in [`Args`] from the flag (and its value, if it takes one).
        pub(crate) type SetFlag = fn(&mut Args, Given) -> Result<(), UsageError>;

        /// Every option, in the order `--help` and the documentation list them.
        pub static OPTIONS: &[Opt] = &[$($name),*];

        /// What each option's flag sets, in the order of [`OPTIONS`].
        static SETTERS: &[Option<SetFlag>] = &[$(
            $crate::settings::generate::first(&[
                $( { let set: SetFlag = $set; Some(set) }, )?
                $( { let set: SetFlag = |a, g| $crate::settings::value::ArgField::set(&mut a.$afield, g); Some(set) }, )?
                $( { let set: SetFlag = |a, g| <$lty as $crate::settings::value::Value>::add(&mut a.set.$lfield, g); Some(set) }, )?
                $( { let set: SetFlag = |a, g| <$ty as $crate::settings::value::Value>::add(&mut a.set.$field, g); Some(set) }, )?
                None,
            ])
        ),*];

        /// The option whose flag is `name` (`--long` or `-s`), with what it sets.
        pub(crate) fn flag(long: Option<&str>, short: Option<char>) -> Option<(&'static Opt, SetFlag)> {
            OPTIONS.iter().zip(SETTERS).find_map(|(o, set)| {
                let named = (long.is_some() && o.long == long) || (short.is_some() && o.short == short);
                if named { (*set).map(|set| (o, set)) } else { None }
            })
        }

        /// The settings one source sets (the flags, the variables or
        /// `reeval.toml`), each `None` where it sets none.
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct Layer {
            $(
                $( #[$meta] pub $lfield: Option<$lty>, )?
                $( #[$meta] pub $field: Option<$ty>, )?
            )*
        }

        impl Layer {
            /// Every setting `source` sets, each read (and so checked) whether or not another source wins.
            pub(crate) fn read<S: $crate::settings::value::Source>(source: &S) -> Result<Layer, S::Error> {
                Ok(Layer {
                    $(
                        $( $lfield: source.read(&$name)?, )?
                        $( $field: source.read(&$name)?, )?
                    )*
                })
            }

            /// This layer over `under`: where this one sets nothing, `under`'s.
            pub(crate) fn or(self, under: Layer) -> Layer {
                Layer {
                    $(
                        $( $lfield: self.$lfield.or(under.$lfield), )?
                        $( $field: self.$field.or(under.$field), )?
                    )*
                }
            }
        }

        /// What the command line asked for: the flags that are no setting,
        /// and the settings it sets ([`Args::set`]).
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct Args {
            /// Substring filters, OR-ed (exact names with `--exact`).
            pub filters: Vec<String>,
            /// `--format json`: libtest's JSON event stream on stdout instead of its lines.
            pub json: bool,
            $( $( #[$meta] pub $afield: $aty, )? )*
            /// The settings the flags set; merged with the variables' and
            /// `reeval.toml`'s by [`Settings::load`](super::Settings::load).
            pub set: Layer,
        }

        /// Every setting of a run, merged once. See the module docs for where each comes from.
        #[derive(Debug, Clone)]
        pub struct Settings {
            $( $(#[$bmeta])* pub $bfield: $bty, )*
            $( $( #[$meta] pub $field: setting_type!($ty $(, $default)?), )? )*
        }

        impl Settings {
            /// The defaults, and what the environment `env` says of where the process runs.
            pub(crate) fn defaults($env: &dyn Fn(&str) -> Option<String>) -> Settings {
                Settings {
                    $( $bfield: $bdefault, )*
                    $( $( $field: setting_default!($($default)?), )? )*
                }
            }

            /// Takes every setting `layer` sets (the merged flags, variables and file).
            pub(crate) fn apply(&mut self, layer: Layer) {
                $( $( if let Some(v) = layer.$field { self.$field = v.into(); } )? )*
            }
        }
    };
}

pub(crate) use {options, setting_default, setting_type};
