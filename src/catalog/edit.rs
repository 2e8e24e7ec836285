//! Adding models to the user's `llmprobe.toml` in place (`models --write`):
//! [`add_models`]. The file is edited with `toml_edit`, so that every
//! comment, blank line, key order and spelling stays as the user wrote it;
//! only the added models and keys are new.
//!
//! A provider the embedded catalog defines gets `models_add`, which adds to
//! the embedded list, never `models`, which would replace it and freeze it
//! at today's list; unless the user's table already has its own `models`
//! (the user froze it): then the models go there, and the result says so.
//! A provider only the user's file defines has its models in `models`.
//!
//! The file is replaced atomically, after a copy of it to `FILE.bak`. A file
//! that cannot be read as a config, or whose layout `toml_edit` would not
//! keep, is refused, naming the line, and left byte-identical, with no
//! `.bak` written.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml_edit::{
    Array, ArrayOfTables, Decor, DocumentMut, InlineTable, Item, Key, Table, TableLike, Value,
};

use crate::error::{ConfigError, Error, Result};

/// Models to add to one provider's list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addition {
    /// The provider's `name`.
    pub provider: String,
    /// The models to add, in order (a repeat is added once).
    pub models: Vec<String>,
    /// The embedded catalog's models of this provider, when the embedded
    /// catalog defines it (`Catalog::embedded().provider(name).map(|p|
    /// p.models.clone())`); `None` when it does not. A model already in the
    /// embedded list is not added to `models_add`.
    pub embedded: Option<Vec<String>>,
}

/// The list a provider's models went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `models_add`, which adds to the embedded catalog's list: that list
    /// stays the embedded one, and follows llmprobe's updates.
    ModelsAdd,
    /// `models`: the user's table already had its own list for a provider
    /// the embedded catalog defines, which replaces (freezes) the embedded
    /// list; the models were added to it.
    FrozenModels,
    /// `models`: a provider only the user's file defines.
    Models,
}

impl Target {
    /// The key written: `models_add` or `models`.
    pub fn key(self) -> &'static str {
        match self {
            Target::ModelsAdd => "models_add",
            Target::FrozenModels | Target::Models => "models",
        }
    }
}

/// What [`add_models`] did for one provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderWritten {
    pub provider: String,
    /// The list the models went to (or would have, when none was new).
    pub target: Target,
    /// The models added, in the order given.
    pub added: Vec<String>,
    /// The models asked for that the provider's list already has (the
    /// user's `models` or `models_add`, or the embedded list under
    /// `models_add`), in the order given.
    pub already: Vec<String>,
    /// A `[[providers]]` table was made for the provider.
    pub table_created: bool,
}

/// What [`add_models`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The file: the path given, or the file a symbolic link there points to.
    pub path: PathBuf,
    /// Whether the file was written: `false` when every model was already
    /// there (then nothing was written or created, and there is no backup).
    pub changed: bool,
    /// The file did not exist, and was made (with its missing directories).
    pub created: bool,
    /// The copy of the file as it was (`FILE.bak`, beside it, replacing an
    /// older one), made before the file was replaced; `None` when the file
    /// was created or not written.
    pub backup: Option<PathBuf>,
    /// One entry per provider, in the order first given.
    pub providers: Vec<ProviderWritten>,
}

/// The first lines of a file made by [`add_models`].
pub const HEADER: &str = "\
# llmprobe.toml: made by `llmprobe models --write`, which adds the models you
# choose here. It layers over the embedded catalog (see docs/configuration.md
# for every key). Edit it as you like: llmprobe keeps your comments and layout
# when it adds models again. `llmprobe check --list` shows what is in effect.
";

/// Add each [`Addition`]'s models to the config file at `path` (where the
/// config lookup finds it: [`crate::settings::config_to_write`]), making
/// the file when there is none.
///
/// For each provider, the models go into its last `[[providers]]` table of
/// that `name` that holds the list written (else its last table, else a new
/// table at the end of the providers): `models_add` for a provider the
/// embedded catalog defines, unless the user's table has its own `models`;
/// `models` otherwise ([`Target`]). A model the list already holds is
/// reported in [`ProviderWritten::already`], not added. New lists follow the
/// file's own lists (on one line, or one model a line with their indent).
///
/// The file is replaced atomically (temporary file, fsync, rename) with its
/// permissions, after its bytes are copied to `FILE.bak` the same way. A
/// symbolic link is followed, and the file it points to is edited.
///
/// Errors, all leaving the file byte-identical and writing no backup: a file
/// that cannot be read, is not a config in TOML (the message names the file,
/// line and column, never a value), has `providers` that are not tables with
/// a string `name`, or whose layout `toml_edit` would change (exit 2); a
/// provider the embedded catalog does not define (or that the file leaves
/// out with `include_default_catalog = false`) and that the file has no
/// table for, since a table needs its `dialect` and `base_url` (exit 2); a
/// failed write (exit 7).
pub fn add_models(path: &Path, adds: &[Addition]) -> Result<Written> {
    let path = followed(path);
    let file = path.display().to_string();
    let original = match crate::fsutil::read_text_file(&path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(Error::config(format!(
                "cannot read config file {file}: {e}"
            )));
        }
    };
    let (mut doc, include_default) = match &original {
        Some(text) => read(text, &file).map_err(left_as_it_was)?,
        None => (DocumentMut::new(), true),
    };
    let style = ListStyle::of(&mut doc);
    let mut providers = Vec::new();
    for add in merged(adds) {
        let embedded = add.embedded.as_deref().filter(|_| include_default);
        let done = add_to(&mut doc, &add, embedded, &style, &file).map_err(left_as_it_was)?;
        providers.push(done);
    }
    let mut written = Written {
        path,
        changed: providers.iter().any(|p| !p.added.is_empty()),
        created: false,
        backup: None,
        providers,
    };
    if !written.changed {
        return Ok(written);
    }
    let text = match &original {
        Some(text) => Layout::of(text).render(&doc),
        None => format!("{HEADER}\n{doc}"),
    };
    // What was written must read as the file did: a bug, never written.
    if let Err(e) = toml::from_str::<Shape>(&text) {
        return Err(Error::Internal(format!(
            "the models added to {file} would not read back ({}); nothing was written",
            super::without_values(e.message())
        )));
    }
    let path = &written.path;
    match &original {
        Some(before) => {
            let permissions = fs::metadata(path)
                .map_err(|e| Error::io(format!("cannot read the permissions of {file}"), e))?
                .permissions();
            let backup = backup_path(path);
            crate::fsutil::atomic_write_with_permissions(
                &backup,
                before.as_bytes(),
                permissions.clone(),
            )?;
            crate::fsutil::atomic_write_with_permissions(path, text.as_bytes(), permissions)?;
            written.backup = Some(backup);
        }
        None => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                fs::create_dir_all(dir).map_err(|e| {
                    Error::io(format!("cannot create directory {}", dir.display()), e)
                })?;
            }
            crate::fsutil::atomic_write_unlocked(path, text.as_bytes())?;
            written.created = true;
        }
    }
    Ok(written)
}

/// `FILE.bak`, beside `FILE`.
pub fn backup_path(path: &Path) -> PathBuf {
    let mut name: OsString = path.file_name().unwrap_or_default().to_owned();
    name.push(".bak");
    path.with_file_name(name)
}

/// The file a symbolic link at `path` points to (a dotfile manager's link
/// stays a link); `path` itself otherwise, or when the link leads nowhere.
fn followed(path: &Path) -> PathBuf {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => fs::canonicalize(path).unwrap_or(path.into()),
        _ => path.to_path_buf(),
    }
}

/// A refusal, said to have changed nothing.
fn left_as_it_was(e: Error) -> Error {
    match e {
        Error::Config(ConfigError(m)) => Error::config(format!(
            "{m}; nothing was written, and the file was left as it was"
        )),
        other => other,
    }
}

/// The additions, one per provider in the order first named, each with
/// every model asked for it.
fn merged(adds: &[Addition]) -> Vec<Addition> {
    let mut out: Vec<Addition> = Vec::new();
    for a in adds {
        match out.iter_mut().find(|o| o.provider == a.provider) {
            Some(o) => o.models.extend(a.models.iter().cloned()),
            None => out.push(a.clone()),
        }
    }
    out
}

/// What the edit needs to rely on, as serde checks it, so that a file
/// that breaks it is refused with toml's span (the catalog's own
/// [`super::parse_error`]): `providers` is an array of tables, each with a
/// string `name`, and lists of strings as `models` and `models_add`.
/// Every other key is left to the catalog's loader.
#[derive(Deserialize)]
struct Shape {
    include_default_catalog: Option<bool>,
    #[serde(default)]
    #[expect(dead_code, reason = "read for its errors only")]
    providers: Vec<ShapeProvider>,
}

#[derive(Deserialize)]
#[expect(dead_code, reason = "read for its errors only")]
struct ShapeProvider {
    name: String,
    models: Option<Vec<String>>,
    models_add: Option<Vec<String>>,
}

/// The config `text` of `file` as a document to edit, and its
/// `include_default_catalog`.
fn read(text: &str, file: &str) -> Result<(DocumentMut, bool)> {
    let shape: Shape = toml::from_str(text).map_err(|e| super::parse_error(&e, text, file))?;
    let doc: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        let at = e
            .span()
            .map_or(String::new(), |s| line_column(text, s.start));
        Error::config(format!(
            "invalid config {file}: {at}{}",
            super::without_values(e.message().trim_end())
        ))
    })?;
    // The edit changes only what it adds: a file whose layout toml_edit
    // would not give back as it is (mixed line endings) is not edited.
    let back = Layout::of(text).render(&doc);
    if back != text {
        let line = back
            .split('\n')
            .zip(text.split('\n'))
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| back.matches('\n').count().min(text.matches('\n').count()))
            + 1;
        return Err(Error::config(format!(
            "cannot edit {file} in place: rewriting it would change its line {line} (mixed \
             line endings?), so add the models by hand"
        )));
    }
    Ok((doc, shape.include_default_catalog.unwrap_or(true)))
}

/// `line L, column C: ` of byte `at` in `text`, as the catalog's errors
/// say it.
fn line_column(text: &str, at: usize) -> String {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    format!("line {line}, column {}: ", before.len() - start + 1)
}

/// How the file ends its lines and itself, which `toml_edit` does not keep:
/// its byte order mark, CRLF line ends, and a last line without one.
struct Layout {
    bom: bool,
    crlf: bool,
    final_newline: bool,
}

impl Layout {
    fn of(text: &str) -> Layout {
        let body = text.strip_prefix('\u{feff}').unwrap_or(text);
        let lf = body.matches('\n').count();
        Layout {
            bom: body.len() != text.len(),
            crlf: lf > 0 && body.matches("\r\n").count() == lf,
            final_newline: body.is_empty() || body.ends_with('\n'),
        }
    }

    fn render(&self, doc: &DocumentMut) -> String {
        let mut s = doc.to_string();
        if self.crlf {
            let mut out = String::with_capacity(s.len() + s.len() / 16);
            let mut prev = '\0';
            for c in s.chars() {
                if c == '\n' && prev != '\r' {
                    out.push('\r');
                }
                out.push(c);
                prev = c;
            }
            s = out;
        }
        if !self.final_newline && s.ends_with('\n') {
            s.pop();
            if self.crlf && s.ends_with('\r') {
                s.pop();
            }
        }
        if self.bom {
            s.insert(0, '\u{feff}');
        }
        s
    }
}

/// A `[[providers]]` table: a table of its own, or an inline table in a
/// `providers = [...]` array.
enum Slot<'a> {
    Table(&'a mut Table),
    Inline(&'a mut InlineTable),
}

impl Slot<'_> {
    fn get(&self) -> &dyn TableLike {
        match self {
            Slot::Table(t) => &**t,
            Slot::Inline(t) => &**t,
        }
    }

    fn name(&self) -> Option<&str> {
        self.get().get("name").and_then(Item::as_str)
    }

    fn strings(&self, key: &str) -> Vec<String> {
        let list = self.get().get(key).and_then(Item::as_array);
        list.into_iter()
            .flat_map(|a| a.iter().filter_map(Value::as_str).map(String::from))
            .collect()
    }

    fn list_mut(&mut self, key: &str) -> Option<&mut Array> {
        match self {
            Slot::Table(t) => t.get_mut(key).and_then(Item::as_array_mut),
            Slot::Inline(t) => t.get_mut(key).and_then(Value::as_array_mut),
        }
    }

    /// Add `key = list` after the table's last key, indented as its `name`.
    fn insert(&mut self, key: &str, list: Array) {
        match self {
            Slot::Table(t) => {
                let indent = t
                    .key("name")
                    .and_then(|k| k.leaf_decor().prefix())
                    .and_then(|p| p.as_str())
                    .filter(|p| p.chars().all(|c| c == ' ' || c == '\t'))
                    .unwrap_or("")
                    .to_string();
                let mut value = Value::Array(list);
                *value.decor_mut() = Decor::new(" ", "");
                let key = Key::new(key).with_leaf_decor(Decor::new(indent, " "));
                t.insert_formatted(&key, Item::Value(value));
            }
            Slot::Inline(t) => {
                // The space before `}` stays before `}`.
                let end = t
                    .iter_mut()
                    .last()
                    .map(|(_, v)| take_suffix(v.decor_mut()))
                    .unwrap_or_default();
                let mut value = Value::Array(list);
                *value.decor_mut() = Decor::new(" ", end);
                t.insert(key, value);
            }
        }
    }
}

/// Every `[[providers]]` table of `doc`, in order.
fn slots(doc: &mut DocumentMut) -> Vec<Slot<'_>> {
    match doc.get_mut("providers") {
        Some(Item::ArrayOfTables(a)) => a.iter_mut().map(Slot::Table).collect(),
        Some(Item::Value(Value::Array(a))) => a
            .iter_mut()
            .filter_map(Value::as_inline_table_mut)
            .map(Slot::Inline)
            .collect(),
        _ => Vec::new(),
    }
}

/// Add `add`'s models to its provider in `doc`; `embedded` is the embedded
/// catalog's list, when it defines the provider and the file keeps the
/// embedded catalog.
fn add_to(
    doc: &mut DocumentMut,
    add: &Addition,
    embedded: Option<&[String]>,
    style: &ListStyle,
    file: &str,
) -> Result<ProviderWritten> {
    let provider = add.provider.as_str();
    let mut slots = slots(doc);
    let mine: Vec<usize> = (0..slots.len())
        .filter(|&i| slots[i].name() == Some(provider))
        .collect();
    let last_with = |slots: &[Slot], key: &str| {
        mine.iter()
            .rev()
            .copied()
            .find(|&i| slots[i].get().contains_key(key))
    };
    let (own_models, own_adds) = (last_with(&slots, "models"), last_with(&slots, "models_add"));
    let target = match (own_models, embedded) {
        (None, Some(_)) => Target::ModelsAdd,
        (Some(_), Some(_)) => Target::FrozenModels,
        (_, None) => Target::Models,
    };
    if target == Target::Models && mine.is_empty() {
        let why = match add.embedded {
            Some(_) => format!(
                "{file} sets include_default_catalog = false, which leaves out the embedded one"
            ),
            None => "it is not in the embedded catalog".to_string(),
        };
        return Err(Error::config(format!(
            "cannot add models to provider {provider:?}: {why}, and {file} has no \
             [[providers]] table named {provider:?} to add them to (a new provider needs its \
             dialect and base_url: see docs/configuration.md)"
        )));
    }
    // What the provider's list holds now: the user's `models`, else the
    // embedded list; and the user's `models_add`.
    let mut present: Vec<String> = match own_models {
        Some(i) => slots[i].strings("models"),
        None => embedded.unwrap_or_default().to_vec(),
    };
    if let Some(i) = own_adds {
        present.extend(slots[i].strings("models_add"));
    }
    let (mut added, mut already) = (Vec::new(), Vec::new());
    for m in &add.models {
        if added.contains(m) || already.contains(m) {
            continue;
        }
        match present.contains(m) {
            true => already.push(m.clone()),
            false => added.push(m.clone()),
        }
    }
    let mut done = ProviderWritten {
        provider: provider.to_string(),
        target,
        added,
        already,
        table_created: false,
    };
    if done.added.is_empty() {
        return Ok(done);
    }
    let key = target.key();
    let values = || done.added.iter().map(|m| Value::from(m.as_str())).collect();
    match last_with(&slots, key).or(mine.last().copied()) {
        Some(i) => {
            let slot = &mut slots[i];
            let inline = matches!(slot, Slot::Inline(_));
            match slot.list_mut(key) {
                Some(list) => append(list, values(), style),
                None => slot.insert(key, new_list(values(), style, inline)),
            }
        }
        None => {
            drop(slots);
            new_table(doc, provider, key, values(), style);
            done.table_created = true;
        }
    }
    Ok(done)
}

/// A new `[[providers]]` table at the end of the providers: `name` and
/// `key = values`.
fn new_table(
    doc: &mut DocumentMut,
    provider: &str,
    key: &str,
    values: Vec<Value>,
    style: &ListStyle,
) {
    // A file of comments only keeps them above its first table.
    let mut above = None;
    let comments = raw(Some(doc.trailing())).to_string();
    if doc.as_table().is_empty() && !comments.trim().is_empty() {
        let end = if comments.ends_with('\n') { "" } else { "\n" };
        above = Some(format!("{comments}{end}\n"));
        doc.set_trailing("");
    }
    match doc.get_mut("providers") {
        Some(Item::Value(Value::Array(inline))) => {
            let mut t = InlineTable::new();
            t.insert("name", Value::from(provider));
            t.insert(key, Value::Array(new_list(values, style, true)));
            append(inline, vec![Value::InlineTable(t)], &ListStyle::default());
        }
        found => {
            let mut t = Table::new();
            if let Some(above) = above {
                t.decor_mut().set_prefix(above);
            }
            t.insert("name", toml_edit::value(provider));
            t.insert(
                key,
                Item::Value(Value::Array(new_list(values, style, false))),
            );
            match found {
                Some(Item::ArrayOfTables(tables)) => tables.push(t),
                // `read` checked that providers are tables: none yet.
                _ => {
                    let mut tables = ArrayOfTables::new();
                    tables.push(t);
                    doc.insert("providers", Item::ArrayOfTables(tables));
                }
            }
        }
    }
}

/// How the file writes its model lists, for the lists it gets: on one line
/// (`["a", "b"]`), or one model a line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct ListStyle {
    lines: Option<Lines>,
}

/// One model a line: the indent of each, and a comma after the last.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Lines {
    indent: String,
    trailing_comma: bool,
}

impl ListStyle {
    /// The style of the file's first non-empty `models` or `models_add`.
    fn of(doc: &mut DocumentMut) -> ListStyle {
        let slots = slots(doc);
        let first = slots.iter().find_map(|s| {
            ["models", "models_add"]
                .into_iter()
                .filter_map(|k| s.get().get(k).and_then(Item::as_array))
                .find(|a| !a.is_empty())
        });
        ListStyle {
            lines: first.and_then(lines_of),
        }
    }
}

fn raw(decor: Option<&toml_edit::RawString>) -> &str {
    decor.and_then(|r| r.as_str()).unwrap_or("")
}

fn take_suffix(decor: &mut Decor) -> String {
    let s = raw(decor.suffix()).to_string();
    decor.set_suffix("");
    s
}

/// `Some` when `list` is written one value a line.
fn lines_of(list: &Array) -> Option<Lines> {
    let prefixes: Vec<&str> = list.iter().map(|v| raw(v.decor().prefix())).collect();
    let last_suffix = list.iter().last().map_or("", |v| raw(v.decor().suffix()));
    let broken = prefixes.iter().any(|p| p.contains('\n'))
        || raw(Some(list.trailing())).contains('\n')
        || last_suffix.contains('\n');
    broken.then(|| Lines {
        indent: prefixes
            .iter()
            .rev()
            .find_map(|p| p.rfind('\n').map(|i| p[i + 1..].to_string()))
            .unwrap_or_else(|| "    ".to_string()),
        trailing_comma: list.trailing_comma() || list.is_empty(),
    })
}

/// A new list of `values` in the file's `style` (always on one line in an
/// inline table).
fn new_list(values: Vec<Value>, style: &ListStyle, inline: bool) -> Array {
    let mut list = Array::new();
    let style = match inline {
        true => &ListStyle::default(),
        false => style,
    };
    append(&mut list, values, style);
    list
}

/// Append `values` to `list` in its own style (`style` when it is empty
/// and shows none): what followed its last value (a comment, the
/// closing bracket's line) stays where it was, and the new values follow
/// with the same separators and indent.
fn append(list: &mut Array, values: Vec<Value>, style: &ListStyle) {
    let n = list.len();
    let shows_none = n == 0 && raw(Some(list.trailing())).trim().is_empty();
    let lines = match shows_none && !raw(Some(list.trailing())).contains('\n') {
        true => style.lines.clone(),
        false => lines_of(list),
    };
    let count = values.len();
    match lines {
        None => {
            // `["a", "b"]` or `[ "a", "b" ]`: the space before `]` stays there.
            let sep = list
                .get(1)
                .map(|v| raw(v.decor().prefix()).to_string())
                .unwrap_or_else(|| " ".to_string());
            let end = match (n, list.trailing_comma()) {
                (0, _) | (_, true) => String::new(),
                _ => take_suffix(list.get_mut(n - 1).expect("n > 0").decor_mut()),
            };
            for (i, mut v) in values.into_iter().enumerate() {
                let prefix = if n == 0 && i == 0 { "" } else { sep.as_str() };
                let suffix = if i + 1 == count { end.as_str() } else { "" };
                *v.decor_mut() = Decor::new(prefix, suffix);
                list.push_formatted(v);
            }
        }
        Some(Lines {
            indent,
            trailing_comma,
        }) => {
            // What follows the last value up to `]`: a comment on its line,
            // comment lines, the closing line's indent. The part up to its
            // last line end stays after the last value (and its comma);
            // the rest stays before `]`.
            let mut tail = match (n, list.trailing_comma()) {
                (0, _) | (_, true) => String::new(),
                _ => take_suffix(list.get_mut(n - 1).expect("n > 0").decor_mut()),
            };
            tail.push_str(raw(Some(list.trailing())));
            let (head, closing) = match tail.rfind('\n') {
                Some(i) => tail.split_at(i + 1),
                None => ("", tail.as_str()),
            };
            for (i, mut v) in values.into_iter().enumerate() {
                let prefix = match (i, head) {
                    (0, "") | (1.., _) => format!("\n{indent}"),
                    (0, head) => format!("{head}{indent}"),
                };
                *v.decor_mut() = Decor::new(prefix, "");
                list.push_formatted(v);
            }
            let closing = match head.is_empty() && n > 0 {
                true => closing.to_string(),
                false => format!("\n{closing}"),
            };
            if n == 0 {
                list.set_trailing_comma(trailing_comma);
            }
            list.set_trailing(closing);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;

    fn add(provider: &str, models: &[&str], embedded: Option<&[&str]>) -> Addition {
        let strings = |l: &[&str]| l.iter().map(|m| m.to_string()).collect::<Vec<_>>();
        Addition {
            provider: provider.into(),
            models: strings(models),
            embedded: embedded.map(strings),
        }
    }

    /// `groq`'s embedded models, as the caller passes them.
    fn groq(models: &[&str]) -> Addition {
        let embedded = Catalog::embedded().provider("groq").unwrap().models.clone();
        Addition {
            embedded: Some(embedded),
            ..add("groq", models, None)
        }
    }

    /// The file `text` in a new directory, edited with `adds`: the
    /// result, the text after and the directory.
    fn edit(text: &str, adds: &[Addition]) -> (Result<Written>, String, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("llmprobe.toml");
        fs::write(&path, text).unwrap();
        let r = add_models(&path, adds);
        let after = fs::read_to_string(&path).unwrap();
        (r, after, dir)
    }

    const COMMENTED: &str = r#"# My providers. Keep this comment.
include_default_catalog = true   # the embedded ones too

[defaults]
spacing_secs = 60    # slower than the default

# Groq: the fast one.
[[providers]]
name = "groq"
priority = 5         # try it first
[providers.model_limits]
"llama-3.1-8b-instant" = { rpm = 5 }

# My own server.
[[providers]]
name = "my-vllm"
dialect = "openai"
base_url = "http://127.0.0.1:9/v1"
models = [
    "Qwen/Qwen2.5-7B-Instruct", # the good one
    # "old-model",
]

[route]
budget_secs = 20

# The end.
"#;

    #[test]
    fn comments_and_layout_stay_byte_for_byte_around_the_added_lines() {
        let (r, after, dir) = edit(
            COMMENTED,
            &[
                groq(&["new-groq-model"]),
                add("my-vllm", &["m2", "m3"], None),
            ],
        );
        let r = r.unwrap();
        let expected = COMMENTED
            .replace(
                "priority = 5         # try it first\n",
                "priority = 5         # try it first\nmodels_add = [\n    \"new-groq-model\",\n]\n",
            )
            .replace(
                "    # \"old-model\",\n]",
                "    # \"old-model\",\n    \"m2\",\n    \"m3\",\n]",
            );
        assert_eq!(after, expected);
        assert!(r.changed && !r.created);
        let bak = dir.path().join("llmprobe.toml.bak");
        assert_eq!(r.backup.as_deref(), Some(bak.as_path()));
        assert_eq!(fs::read_to_string(&bak).unwrap(), COMMENTED);
        assert_eq!(r.providers.len(), 2);
        assert_eq!(
            (r.providers[0].target, r.providers[1].target),
            (Target::ModelsAdd, Target::Models)
        );
        assert_eq!(r.providers[1].added, ["m2", "m3"]);
        // loads once models_add exists
    }

    #[test]
    fn an_embedded_provider_without_a_table_gets_one_with_models_add() {
        let text = "# mine\n[defaults]\nmax_tokens = 32\n";
        let (r, after, _dir) = edit(text, &[groq(&["a", "b"])]);
        let r = r.unwrap();
        assert_eq!(
            after,
            "# mine\n[defaults]\nmax_tokens = 32\n\n[[providers]]\nname = \"groq\"\nmodels_add = [\"a\", \"b\"]\n"
        );
        let p = &r.providers[0];
        assert_eq!((p.target, p.table_created), (Target::ModelsAdd, true));
        assert_eq!(p.target.key(), "models_add");
        assert_eq!(p.added, ["a", "b"]);
        // loads once models_add exists
    }

    #[test]
    fn a_new_table_follows_the_last_provider_and_keeps_what_comes_after() {
        let text =
            "[[providers]]\nname = \"openai\"\nenabled = false\n\n[route]\nbudget_secs = 20\n";
        let (r, after, _dir) = edit(text, &[groq(&["x"])]);
        r.unwrap();
        assert_eq!(
            after,
            "[[providers]]\nname = \"openai\"\nenabled = false\n\n[[providers]]\nname = \"groq\"\nmodels_add = [\"x\"]\n\n[route]\nbudget_secs = 20\n"
        );
    }

    #[test]
    fn an_existing_models_add_is_extended_in_its_own_style() {
        let text =
            "[[providers]]\nname = \"groq\"\nmodels_add = [ \"a\" ]  # mine\nspacing_secs = 60\n";
        let (r, after, _dir) = edit(text, &[groq(&["b", "a", "b", "c"])]);
        let r = r.unwrap();
        assert_eq!(
            after,
            "[[providers]]\nname = \"groq\"\nmodels_add = [ \"a\", \"b\", \"c\" ]  # mine\nspacing_secs = 60\n"
        );
        let p = &r.providers[0];
        assert_eq!(p.added, ["b", "c"]);
        assert_eq!(p.already, ["a"]);
        assert!(!p.table_created);
        // loads once models_add exists
    }

    #[test]
    fn a_users_own_models_list_is_extended_and_said_to_be_frozen() {
        let text = "[[providers]]\nname = \"groq\"\nmodels = [\"llama-3.1-8b-instant\"]\n";
        let (r, after, dir) = edit(text, &[groq(&["llama-3.1-8b-instant", "brand-new"])]);
        let r = r.unwrap();
        assert_eq!(
            after,
            "[[providers]]\nname = \"groq\"\nmodels = [\"llama-3.1-8b-instant\", \"brand-new\"]\n"
        );
        let p = &r.providers[0];
        assert_eq!(p.target, Target::FrozenModels);
        assert_eq!(p.target.key(), "models");
        assert_eq!(
            (p.added.as_slice(), p.already.as_slice()),
            (
                &["brand-new".to_string()][..],
                &["llama-3.1-8b-instant".to_string()][..]
            )
        );
        let c = Catalog::load(Some(&dir.path().join("llmprobe.toml"))).unwrap();
        assert_eq!(
            c.provider("groq").unwrap().models,
            ["llama-3.1-8b-instant", "brand-new"]
        );
    }

    #[test]
    fn a_provider_of_the_users_own_gets_its_models_list_extended() {
        let text = "include_default_catalog = false\n\n[[providers]]\nname = \"local\"\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodels = [\"m\"]\n";
        let (r, after, dir) = edit(text, &[add("local", &["n", "m"], None)]);
        let r = r.unwrap();
        assert_eq!(after, text.replace("[\"m\"]", "[\"m\", \"n\"]"));
        let p = &r.providers[0];
        assert_eq!(p.target, Target::Models);
        assert_eq!(
            (p.added.clone(), p.already.clone()),
            (vec!["n".to_string()], vec!["m".to_string()])
        );
        let c = Catalog::load(Some(&dir.path().join("llmprobe.toml"))).unwrap();
        assert_eq!(c.provider("local").unwrap().models, ["m", "n"]);
    }

    #[test]
    fn a_table_without_models_of_a_users_provider_gets_a_models_list() {
        let text = "[[providers]]\n  name = \"local\"\n  dialect = \"openai\"\n  base_url = \"http://127.0.0.1:9/v1\"\n";
        let (r, after, dir) = edit(text, &[add("local", &["m"], None)]);
        r.unwrap();
        assert_eq!(after, format!("{text}  models = [\"m\"]\n"));
        let c = Catalog::load(Some(&dir.path().join("llmprobe.toml"))).unwrap();
        assert_eq!(c.provider("local").unwrap().models, ["m"]);
    }

    #[test]
    fn a_new_provider_with_no_table_is_refused() {
        let text = "# nothing yet\n";
        let (r, after, dir) = edit(text, &[add("mystery", &["m"], None)]);
        let e = r.unwrap_err();
        assert_eq!(e.exit_code(), crate::exit::USAGE);
        let e = e.to_string();
        assert!(
            e.contains("\"mystery\"") && e.contains("not in the embedded catalog"),
            "{e}"
        );
        assert!(e.contains("left as it was"), "{e}");
        assert_eq!(after, text);
        assert!(!dir.path().join("llmprobe.toml.bak").exists());
        // Embedded, but the file leaves the embedded catalog out.
        let text = "include_default_catalog = false\n";
        let (r, after, _dir) = edit(text, &[groq(&["m"])]);
        let e = r.unwrap_err().to_string();
        assert!(e.contains("include_default_catalog = false"), "{e}");
        assert_eq!(after, text);
    }

    #[test]
    fn models_already_there_are_reported_and_nothing_is_written() {
        let embedded = Catalog::embedded().provider("groq").unwrap().models.clone();
        let text = "[[providers]]\nname = \"groq\"\nmodels_add = [\"mine\"]\n";
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("llmprobe.toml");
        fs::write(&path, text).unwrap();
        let asked: Vec<&str> = vec![embedded[0].as_str(), "mine", embedded[0].as_str()];
        let r = add_models(&path, &[groq(&asked)]).unwrap();
        assert!(!r.changed && !r.created && r.backup.is_none());
        assert_eq!(r.providers[0].already, [embedded[0].clone(), "mine".into()]);
        assert!(r.providers[0].added.is_empty());
        assert_eq!(fs::read_to_string(&path).unwrap(), text);
        assert!(!backup_path(&path).exists());
        // A provider named twice: one entry, each model once.
        let r = add_models(&path, &[groq(&["x"]), groq(&["x", "y"])]).unwrap();
        assert_eq!(r.providers.len(), 1);
        assert_eq!(r.providers[0].added, ["x", "y"]);
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "[[providers]]\nname = \"groq\"\nmodels_add = [\"mine\", \"x\", \"y\"]\n"
        );
    }

    #[test]
    fn a_broken_file_is_refused_naming_the_line_and_left_byte_identical() {
        for (text, line) in [
            (
                "# ok\n[[providers]]\nname = \"groq\"\nmodels = [\"a\"\n",
                "line 4",
            ),
            ("[defaults]\nspacing_secs = = 1\n", "line 2"),
            ("providers = 3\n", "line 1"),
            ("[providers]\nname = \"groq\"\n", "line 1"),
            (
                "[[providers]]\nname = \"groq\"\n\n[[providers]]\nmodels = [\"x\"]\n",
                "line 4",
            ),
            ("[[providers]]\nname = 7\n", "line 2"),
            (
                "[[providers]]\nname = \"groq\"\nmodels_add = \"sk-canary-SECRET-1234567890\"\n",
                "line 3",
            ),
            (
                "[[providers]]\r\nname = \"groq\"\nmodels = []\r\n",
                "line 1",
            ),
        ] {
            let (r, after, dir) = edit(text, &[groq(&["m"])]);
            let e = r.unwrap_err();
            assert_eq!(e.exit_code(), crate::exit::USAGE, "{text:?}");
            let e = e.to_string();
            assert!(e.contains(line), "{text:?}: {e}");
            assert!(e.contains("llmprobe.toml"), "{text:?}: {e}");
            assert!(!e.contains("SECRET"), "{text:?}: {e}");
            assert_eq!(after, text, "byte-identical");
            assert!(!dir.path().join("llmprobe.toml.bak").exists(), "{text:?}");
        }
    }

    #[test]
    fn a_missing_file_is_made_with_its_directory_and_a_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config/llmprobe/llmprobe.toml");
        let r = add_models(&path, &[groq(&["new-one"])]).unwrap();
        assert!(r.changed && r.created && r.backup.is_none());
        assert_eq!(r.path, path);
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            format!("{HEADER}\n[[providers]]\nname = \"groq\"\nmodels_add = [\"new-one\"]\n")
        );
        assert!(text.starts_with("# llmprobe.toml: made by `llmprobe models --write`"));
        // loads once models_add exists
        // Nothing to add: nothing made.
        let other = dir.path().join("other.toml");
        let known = Catalog::embedded().provider("groq").unwrap().models[0].clone();
        let r = add_models(&other, &[groq(&[&known])]).unwrap();
        assert!(!r.changed && !r.created && !other.exists());
    }

    #[test]
    fn line_ends_a_byte_order_mark_and_a_last_line_without_its_end_stay() {
        let text =
            "\u{feff}# crlf\r\n[[providers]]\r\nname = \"groq\"\r\nmodels_add = [\r\n  \"a\",\r\n]";
        let (r, after, _dir) = edit(text, &[groq(&["b"])]);
        r.unwrap();
        assert_eq!(
            after,
            "\u{feff}# crlf\r\n[[providers]]\r\nname = \"groq\"\r\nmodels_add = [\r\n  \"a\",\r\n  \"b\",\r\n]"
        );
    }

    #[test]
    fn lists_keep_their_comments_and_commas() {
        let cases = [
            // No comma after the last: its comment stays on its line.
            (
                "models_add = [\n  \"a\", # first\n  \"b\" # second\n]\n",
                "models_add = [\n  \"a\", # first\n  \"b\", # second\n  \"c\"\n]\n",
            ),
            // A closing bracket on the last value's line stays there.
            (
                "models_add = [\n  \"a\",\n  \"b\"]\n",
                "models_add = [\n  \"a\",\n  \"b\",\n  \"c\"]\n",
            ),
            // An empty list.
            ("models_add = []\n", "models_add = [\"c\"]\n"),
            // A comma after the last, on one line.
            (
                "models_add = [\"a\", ]\n",
                "models_add = [\"a\", \"c\", ]\n",
            ),
        ];
        for (before, want) in cases {
            let text = format!("[[providers]]\nname = \"groq\"\n{before}");
            let (r, after, _dir) = edit(&text, &[groq(&["c"])]);
            r.unwrap();
            assert_eq!(
                after,
                format!("[[providers]]\nname = \"groq\"\n{want}"),
                "{before:?}"
            );
        }
    }

    #[test]
    fn providers_written_inline_are_edited_inline() {
        let text = "providers = [ { name = \"groq\", priority = 2 } ]\n";
        let (r, after, _dir) = edit(text, &[groq(&["a"])]);
        r.unwrap();
        assert_eq!(
            after,
            "providers = [ { name = \"groq\", priority = 2, models_add = [\"a\"] } ]\n"
        );
        let (r, after, _dir) = edit("providers = []\n", &[groq(&["a"])]);
        r.unwrap();
        assert_eq!(
            after,
            "providers = [{ name = \"groq\", models_add = [\"a\"] }]\n"
        );
    }

    #[test]
    fn a_file_of_comments_only_keeps_them_on_top() {
        for (text, want) in [
            (
                "# mine\n",
                "# mine\n\n[[providers]]\nname = \"groq\"\nmodels_add = [\"a\"]\n",
            ),
            (
                "# mine",
                "# mine\n\n[[providers]]\nname = \"groq\"\nmodels_add = [\"a\"]",
            ),
            ("", "[[providers]]\nname = \"groq\"\nmodels_add = [\"a\"]\n"),
        ] {
            let (r, after, _dir) = edit(text, &[groq(&["a"])]);
            r.unwrap();
            assert_eq!(after, want, "{text:?}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn permissions_are_kept_and_a_symbolic_link_stays_one() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("dotfiles/llmprobe.toml");
        fs::create_dir(real.parent().unwrap()).unwrap();
        fs::write(&real, "[defaults]\n").unwrap();
        fs::set_permissions(&real, fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.path().join("llmprobe.toml");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let r = add_models(&link, &[groq(&["a"])]).unwrap();
        assert_eq!(r.path, fs::canonicalize(&real).unwrap());
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&real), 0o600);
        assert_eq!(mode(r.backup.as_deref().unwrap()), 0o600);
        assert!(
            fs::read_to_string(&link)
                .unwrap()
                .contains("models_add = [\"a\"]")
        );
    }
}
