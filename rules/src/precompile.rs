//! Reads a rule folder for the build script: lists it with [`super::listing`], parses
//! every file as TOML and converts it to JSON. Shared with this crate's tests, which run
//! it on broken folders (a build must fail on them).

use std::fs;
use std::path::Path;

use super::listing;

/// One file of the folder, read and checked.
pub struct File {
    /// The name in the pack (`cuda-oom.toml`, `data/ops.toml`).
    pub name: String,
    /// Its path on disk.
    pub path: std::path::PathBuf,
    /// The TOML document as JSON.
    pub value: serde_json::Value,
}

/// Every file of the folder at `root`, in pack order. Fails on a folder without rule
/// files, a file that cannot be read, or one that is not valid TOML (with its location).
pub fn read_folder(root: &Path) -> Result<Vec<File>, String> {
    let mut names = Vec::new();
    for (dir, prefix) in [(root.to_path_buf(), ""), (root.join("data"), "data/")] {
        let read = match fs::read_dir(&dir) {
            Ok(r) => r,
            Err(_) if !prefix.is_empty() => continue,
            Err(e) => return Err(format!("{}: {e}", dir.display())),
        };
        for e in read {
            let e = e.map_err(|e| format!("{}: {e}", dir.display()))?;
            let name = e.file_name().to_string_lossy().into_owned();
            let kind_ok = if prefix.is_empty() { listing::is_rule_name(&name) } else { listing::is_data_name(&name) };
            if kind_ok && e.file_type().map_err(|e| format!("{name}: {e}"))?.is_file() {
                names.push(format!("{prefix}{name}"));
            }
        }
    }
    listing::order(&mut names);
    if !names.iter().any(|n| !n.starts_with("data/")) {
        return Err(format!("no rule files (*.toml) in {}", root.display()));
    }
    let mut files = Vec::new();
    for name in names {
        let path = root.join(&name);
        let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let table: toml::Table = toml::from_str(&text).map_err(|e| {
            let (line, col) = e.span().map(|s| line_col(&text, s.start)).unwrap_or((1, 1));
            format!("{}:{line}:{col}: {}", path.display(), e.message().trim_end())
        })?;
        let value = serde_json::to_value(&table).map_err(|e| format!("{name}: {e}"))?;
        files.push(File { name, path, value });
    }
    Ok(files)
}

/// 1-based line and column (characters) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0) + 1;
    (line, col)
}
