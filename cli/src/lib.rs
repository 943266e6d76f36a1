//! `torchdx`: diagnose PyTorch training failures from their logs, offline.
//!
//! The command's code as a library, so that other front ends run the very same command
//! in process (the Python package's `torchdx` console script calls [`main_from`]) and
//! read files and log folders the same way ([`input`]). Not a stable API beyond these:
//! embed `torchdx-core` for diagnoses.

use std::borrow::Cow;
use std::fs;
use std::io::{self, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use clap::{Parser, Subcommand, ValueEnum};
use torchdx_core::authoring::check::{self, Status};
use torchdx_core::authoring::docs;
use torchdx_core::{Engine, RuleSource};

mod dts;
mod eval;
pub mod input;
mod scaffold;

/// A command's exit status: 0 done, 1 the log or the rules have a problem the command
/// reports (a failed check, a diagnosis with findings), 2 the command could not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExitCode(u8);

impl ExitCode {
    /// Done, nothing to report.
    pub const SUCCESS: ExitCode = ExitCode(0);

    /// A status by number.
    pub fn from(code: u8) -> ExitCode {
        ExitCode(code)
    }

    /// The status as a number.
    pub fn code(self) -> u8 {
        self.0
    }
}

#[derive(Parser)]
#[command(name = "torchdx", version, about = "Diagnose PyTorch training failures from their logs, offline")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Format {
    Text,
    Md,
    Json,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Module {
    Esm,
    Cjs,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Color {
    Auto,
    Always,
    Never,
}

#[derive(Subcommand)]
enum Cmd {
    /// Diagnose a log file (or `-` for standard input).
    Diagnose {
        /// The log (plain, .gz or .zst), a `torchrun --log-dir` folder or any folder of
        /// per-rank logs, or `-` / nothing for standard input. Several files and folders
        /// are one run: read in parallel, each file its own stream.
        files: Vec<PathBuf>,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
        /// Add or override rules from this folder of rule files.
        #[arg(long)]
        rules: Option<PathBuf>,
        #[arg(long, value_enum, default_value = "auto")]
        color: Color,
        /// Wrap text output to this many columns (default: the terminal's width, or
        /// `COLUMNS`, or 100 when not a terminal).
        #[arg(long, value_parser = clap::value_parser!(u16).range(24..))]
        width: Option<u16>,
        /// Redact the log first (paths, users, hosts, IPs, e-mails, tokens) so the
        /// report can be shared.
        #[arg(long)]
        redact: bool,
        /// Threads reading the files of a folder or several files (default: one per
        /// core). The report is the same for any number.
        #[arg(long, short = 'j', value_parser = clap::value_parser!(u16).range(1..))]
        threads: Option<u16>,
    },
    /// Print the log with secrets and identities replaced by placeholders.
    Redact {
        /// The log; `-` or nothing reads standard input.
        file: Option<PathBuf>,
    },
    /// Print a rule's encyclopedia entry.
    Explain {
        /// Rule id (see `--list`).
        id: Option<String>,
        /// List every rule.
        #[arg(long)]
        list: bool,
        /// Print the keys rule text and conditions can use (evidence and engine facts).
        #[arg(long)]
        facts: bool,
        #[arg(long, value_enum, default_value = "md")]
        format: Format,
        /// Explain the rules of this folder too (added to or overriding the built-in ones).
        #[arg(long)]
        rules: Option<PathBuf>,
    },
    /// Work on rule files.
    Rules {
        #[command(subcommand)]
        cmd: RulesCmd,
    },
    /// Score the engine on a corpus of CASE/log.txt + CASE/truth.toml.
    Eval {
        dir: PathBuf,
        /// Also write a machine-readable summary here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// List each miss.
        #[arg(long)]
        verbose: bool,
    },
}

#[derive(Subcommand)]
enum RulesCmd {
    /// List the rules of the built-in pack (plus DIR's, if given).
    List {
        /// A folder of rule files, added to or overriding the built-in ones.
        dir: Option<PathBuf>,
        /// The same, as `diagnose --rules` takes it.
        #[arg(long, conflicts_with = "dir")]
        rules: Option<PathBuf>,
    },
    /// Validate rule files: schema, templates, placeholders, ids, examples.
    Check { dir: Option<PathBuf> },
    /// Run every example and show what differs from its expected evidence.
    Test {
        dir: Option<PathBuf>,
        /// Rewrite each example's [example.evidence] with what the engine produced.
        #[arg(long)]
        bless: bool,
    },
    /// Write a new rule file with every section.
    New {
        id: String,
        #[arg(long, default_value = "rules")]
        dir: PathBuf,
    },
    /// Keep rule files in one canonical layout.
    Fmt {
        dir: Option<PathBuf>,
        #[arg(long)]
        check: bool,
    },
    /// Print the literals the engine's scan searches for, one per line (for baselines).
    Literals,
    /// Write the built-in pack's precompiled form as a JS module (the WASM packages'
    /// torchdx_rules.js), or check that a .wasm does not embed the pack itself.
    Bundle {
        /// The module to write.
        #[arg(long, required_unless_present = "absent_from")]
        out: Option<PathBuf>,
        /// The module system of the file written.
        #[arg(long, value_enum, default_value = "esm")]
        module: Module,
        /// Fail if this .wasm holds the rule pack's text.
        #[arg(long)]
        absent_from: Option<PathBuf>,
    },
    /// Write every example log to OUT/<rule>--<example>.log.
    Examples {
        /// A folder of rule files, added to or overriding the built-in ones.
        dir: Option<PathBuf>,
        #[arg(long)]
        out: PathBuf,
    },
    /// Write the JSON Schemas of reports and rule files (rules/schema/*.schema.json) and
    /// the TypeScript declarations generated from them (rules/schema/torchdx.d.ts).
    Schema {
        #[arg(long, default_value = "rules/schema")]
        out: PathBuf,
        /// Fail if the files on disk differ instead of writing them.
        #[arg(long)]
        check: bool,
    },
    /// Generate docs/rules/*.md and the hub page from the rules on disk (DIR, or
    /// `./rules` when it exists, over the built-in pack).
    Docs {
        /// A folder of rule files (default: `./rules` when it exists).
        dir: Option<PathBuf>,
        #[arg(long, default_value = "docs/rules")]
        out: PathBuf,
        /// Fail if the files on disk differ instead of writing them.
        #[arg(long)]
        check: bool,
    },
}

/// A failure the user must see: printed as `torchdx: ...`, exit status 2. An empty
/// message is [`Fail::pipe_closed`].
#[derive(Debug)]
struct Fail(String);

impl Fail {
    /// Standard output's reader went away (`| head`): nothing more to say, exit 141
    /// (128 + SIGPIPE), the status of a `cat` the closed pipe killed.
    fn pipe_closed() -> Fail {
        Fail(String::new())
    }
}

impl<E: std::fmt::Display> From<E> for Fail {
    fn from(e: E) -> Fail {
        Fail(e.to_string())
    }
}

/// Runs the command line `args` (the program name first, as `std::env::args_os`
/// gives it) and returns the exit status. Usage errors, `--help` and `--version` print
/// as clap prints them.
pub fn main_from<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    match run(cli) {
        Ok(code) => i32::from(code.code()),
        Err(Fail(msg)) if msg.is_empty() => 141,
        Err(Fail(msg)) => {
            let _ = writeln!(io::stderr(), "torchdx: {msg}");
            2
        }
    }
}

/// Largest rule or data file read, in bytes: a rule is text a person writes.
const MAX_RULE_FILE: u64 = 16 << 20;

/// Reads the rule files of a folder as `torchdx_rules::listing` defines them (`*.toml`
/// and `data/*.toml`), in pack order. Symlinks and files that are not regular files are
/// refused, not followed or skipped (a `*.toml` link to `/proc/self/environ` would
/// otherwise be read, and echoed in a diagnostic), as is a file that is not UTF-8.
pub(crate) fn read_rule_dir(dir: &Path) -> Result<Vec<(String, String)>, Fail> {
    use torchdx_rules::listing;
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    for (sub, prefix) in [(dir.to_path_buf(), ""), (dir.join("data"), "data/")] {
        let rd = match fs::read_dir(&sub) {
            Ok(r) => r,
            Err(e) if prefix.is_empty() => return Err(Fail(format!("{}: {e}", sub.display()))),
            Err(_) => continue,
        };
        for e in rd {
            let e = e.map_err(|e| Fail(format!("{}: {e}", sub.display())))?;
            let name = e.file_name().to_string_lossy().into_owned();
            let listed = if prefix.is_empty() { listing::is_rule_name(&name) } else { listing::is_data_name(&name) };
            if !listed {
                continue;
            }
            let p = e.path();
            let ft = e.file_type().map_err(|e| Fail(format!("{}: {e}", p.display())))?;
            if ft.is_symlink() {
                return Err(Fail(format!(
                    "{}: is a symbolic link; rule folders are read without following links (copy the file in)",
                    p.display()
                )));
            }
            if !ft.is_file() {
                return Err(Fail(format!("{}: not a regular file", p.display())));
            }
            found.push((format!("{prefix}{name}"), p));
        }
    }
    let mut names: Vec<String> = found.iter().map(|(n, _)| n.clone()).collect();
    listing::order(&mut names);
    let mut out = Vec::new();
    for n in names {
        let Some((_, p)) = found.iter().find(|(m, _)| *m == n) else { continue };
        let len = fs::metadata(p).map_err(|e| Fail(format!("{}: {e}", p.display())))?.len();
        if len > MAX_RULE_FILE {
            return Err(Fail(format!("{}: {len} bytes; a rule file holds at most {MAX_RULE_FILE}", p.display())));
        }
        let bytes = fs::read(p).map_err(|e| Fail(format!("{}: {e}", p.display())))?;
        let text = String::from_utf8(bytes).map_err(|e| {
            let at = e.utf8_error().valid_up_to();
            let line = e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1;
            Fail(format!("{}:{line}: not UTF-8 (invalid byte at offset {at})", p.display()))
        })?;
        out.push((p.display().to_string(), text));
    }
    Ok(out)
}

/// Writes `path` (inside `dir`) through a temporary file and an atomic rename, never
/// through a symbolic link: a `*.toml` link in a rule folder must not make `rules fmt` or
/// `rules test --bless` rewrite a file elsewhere.
pub(crate) fn write_inside(dir: &Path, path: &Path, text: &str) -> Result<(), Fail> {
    let fail = |e: io::Error| Fail(format!("{}: {e}", path.display()));
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let (d, p) = (dir.canonicalize().map_err(fail)?, parent.canonicalize().map_err(fail)?);
    if !p.starts_with(&d) {
        return Err(Fail(format!("{}: outside {}", path.display(), dir.display())));
    }
    if fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(Fail(format!("{}: is a symbolic link; not written", path.display())));
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // The temporary file is created, never opened: a link planted under its name (or
    // any file there) makes the creation fail instead of writing through it.
    let mut n = 0u32;
    let (tmp, mut file) = loop {
        let tmp = parent.join(format!(".{name}.{}-{n}.torchdx-tmp", std::process::id()));
        match fs::OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 64 => n += 1,
            Err(e) => return Err(fail(e)),
        }
    };
    let written = io::Write::write_all(&mut file, text.as_bytes()).and_then(|()| file.sync_all());
    drop(file);
    written.and_then(|()| fs::rename(&tmp, path)).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        fail(e)
    })
}

/// Creates `path` with `text`, failing if anything (a file, a link, even a dangling
/// one) is already there: nothing is written through a link.
pub(crate) fn create_new(path: &Path, text: &str) -> Result<(), Fail> {
    let fail = |e: io::Error| Fail(format!("{}: {e}", path.display()));
    let mut f = fs::OpenOptions::new().write(true).create_new(true).open(path).map_err(fail)?;
    io::Write::write_all(&mut f, text.as_bytes()).map_err(fail)
}

fn sources(files: &[(String, String)]) -> Vec<RuleSource<'_>> {
    files.iter().map(|(n, t)| RuleSource { name: n, text: t }).collect()
}

/// The engine `--rules DIR` asks for: the built-in pack, plus DIR's rules. Errors name
/// the file and line.
pub fn engine_for(rules: &Option<PathBuf>) -> Result<Engine, String> {
    match rules {
        None => Ok(Engine::builtin()),
        Some(_) => engine_with(rules).map(Cow::into_owned).map_err(|Fail(m)| m),
    }
}

/// The built-in engine of this process: built once, never dropped. Dropping it was 7 of
/// the 76 million instructions of a run on a short log, and the Python package runs
/// the command in process, where later runs reuse it.
static BUILTIN: OnceLock<Engine> = OnceLock::new();

fn engine_with(rules: &Option<PathBuf>) -> Result<Cow<'static, Engine>, Fail> {
    match rules {
        None => Ok(Cow::Borrowed(BUILTIN.get_or_init(Engine::builtin))),
        Some(dir) => {
            let files = read_rule_dir(dir)?;
            Ok(Cow::Owned(Engine::with_extra(&sources(&files))?))
        }
    }
}

/// Inputs larger than this show a progress bar (on a terminal).
const PROGRESS_MIN: u64 = 64 * 1024 * 1024;

/// Streams a file or standard input through the engine in large chunks, so memory
/// stays bounded whatever the input size.
fn diagnose_input(engine: &Engine, file: &Option<PathBuf>) -> Result<torchdx_core::Report, Fail> {
    let (mut reader, name, len): (Box<dyn Read>, String, Option<u64>) = match file {
        Some(p) if p.as_os_str() != "-" => {
            let len = fs::metadata(p).ok().map(|m| m.len());
            let f = input::open(p).map_err(|e| Fail(format!("{}: {e}", p.display())))?;
            (f, p.display().to_string(), len)
        }
        _ => {
            if io::stdin().is_terminal() {
                // A silent wait looks like a hang to someone who expected a file argument.
                let _ = writeln!(
                    io::stderr(),
                    "torchdx: reading the log from standard input: paste it, then press Ctrl-D (Ctrl-Z, Enter on Windows); or give a file: torchdx diagnose train.log"
                );
            }
            (Box::new(io::stdin().lock()), "standard input".to_string(), None)
        }
    };
    let bar = match len {
        Some(n) if n > PROGRESS_MIN && io::stderr().is_terminal() => {
            let b = indicatif::ProgressBar::new(n);
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} diagnosing {bytes} {wide_bar} {bytes_per_sec} eta {eta}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            Some(b)
        }
        _ => None,
    };
    let mut d = engine.stream();
    input::feed_all(&mut d, &mut reader, |n| {
        if let Some(b) = &bar {
            b.inc(n as u64);
        }
    })
    .map_err(|e| Fail(format!("{name}: {e}")))?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(d.finish())
}

/// `1 file`, `2 files`.
pub(crate) fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn out(s: &str) -> Result<(), Fail> {
    if stdout_was_closed() {
        return Err(Fail("standard output is closed: the report cannot be written".into()));
    }
    let mut o = io::stdout().lock();
    match o.write_all(s.as_bytes()).and_then(|_| o.flush()) {
        Ok(()) => Ok(()),
        // A closed pipe (`| head`): no message, but not success either.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(Fail::pipe_closed()),
        Err(e) => Err(Fail(format!("standard output: {e}"))),
    }
}

/// Whether standard output was closed when torchdx started (`torchdx ... >&-`). Rust's
/// runtime reopens a closed descriptor 0-2 on `/dev/null` before `main`, read-write, so
/// the report would vanish with status 0; a shell's `> /dev/null` opens it write-only.
/// Linux only (it reads `/proc/self`); elsewhere the report goes where Rust sends it.
fn stdout_was_closed() -> bool {
    if !cfg!(target_os = "linux") {
        return false;
    }
    let null = fs::read_link("/proc/self/fd/1").is_ok_and(|p| p == Path::new("/dev/null"));
    let read_write = || {
        let info = fs::read_to_string("/proc/self/fdinfo/1").unwrap_or_default();
        let flags = info.lines().find_map(|l| l.strip_prefix("flags:")).map(str::trim);
        flags.and_then(|f| u32::from_str_radix(f, 8).ok()).is_some_and(|f| f & 0o3 == 0o2)
    };
    null && read_write()
}

/// The rule folder to work on: DIR, else `./rules` when it exists.
fn rule_dir(dir: &Option<PathBuf>) -> Option<PathBuf> {
    dir.clone().or_else(|| Some(PathBuf::from("rules")).filter(|p| p.is_dir()))
}

/// `explain --list`: each rule with its family, title and the leading words of the
/// messages it recognises, so a user can tell whether their failure is known.
fn explain_list(engine: &Engine, fmt: Format) -> Result<String, Fail> {
    let rows: Vec<(String, String, String, Vec<String>)> = engine
        .pack()
        .rules()
        .iter()
        .map(|r| {
            // One entry per wording: a cut one (`… …`) and the whole one it begins are one.
            let mut words: Vec<String> = Vec::new();
            for w in r.spec.matches.iter().map(|m| leading_words(&m.template)).filter(|w| !w.is_empty()) {
                let stem = |x: &str| x.trim_end_matches(" …").to_string();
                match words.iter_mut().find(|o| stem(o).starts_with(&stem(&w)) || stem(&w).starts_with(&stem(o))) {
                    Some(o) if stem(&w).len() < stem(o).len() => *o = w,
                    Some(_) => {}
                    None => words.push(w),
                }
            }
            (r.id().to_string(), r.family().to_string(), docs::for_reader(&r.spec.title), words)
        })
        .collect();
    if fmt == Format::Json {
        let list: Vec<serde_json::Value> = rows
            .iter()
            .map(|(id, family, title, words)| serde_json::json!({ "id": id, "family": family, "title": title, "messages": words }))
            .collect();
        return Ok(serde_json::to_string_pretty(&list)? + "\n");
    }
    let mut s = String::new();
    for (id, family, title, words) in rows {
        s.push_str(&format!("{id:<28} {family:<26} {title}\n"));
        if !words.is_empty() {
            let quoted: Vec<String> = words.iter().map(|w| format!("\"{w}\"")).collect();
            s.push_str(&format!("    recognises: {}\n", quoted.join(", ")));
        }
    }
    Ok(s)
}

/// The words a template's message starts with (its first literal text of three letters
/// or more, up to the first capture), at most about 48 characters: `CUDA out of memory.
/// Tried to allocate`.
fn leading_words(template: &str) -> String {
    let mut segments: Vec<String> = vec![String::new()];
    let mut depth = 0usize;
    for c in template.chars() {
        match c {
            '{' => {
                depth += 1;
                if depth == 1 {
                    segments.push(String::new());
                }
            }
            '}' if depth > 0 => depth -= 1,
            _ if depth == 0 => segments.last_mut().expect("one segment").push(c),
            _ => {}
        }
    }
    let lit = segments
        .iter()
        .map(|s| s.trim().trim_end_matches([',', ':', '(', '[', '\'', '"', '#']).trim())
        .find(|s| s.chars().filter(|c| c.is_alphabetic()).count() >= 3)
        .unwrap_or("");
    if lit.chars().count() <= 48 {
        return lit.to_string();
    }
    let cut: String = lit.chars().take(48).collect();
    let cut = cut.rsplit_once(' ').map_or(cut.as_str(), |(a, _)| a);
    format!("{cut} …")
}

/// The width text output wraps to: `COLUMNS` when set (shells export it, and it lets a
/// user pin the width), else the terminal's, else `Report::TEXT_WIDTH` (100) for a file or a
/// pipe, where no width is right.
fn text_width() -> usize {
    let columns = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse::<usize>().ok()).filter(|&c| c >= 24);
    columns
        .or_else(|| {
            let term = console::Term::stdout();
            (io::stdout().is_terminal()).then(|| term.size_checked()).flatten().map(|(_, cols)| usize::from(cols))
        })
        .unwrap_or(torchdx_core::Report::TEXT_WIDTH)
}

fn run(cli: Cli) -> Result<ExitCode, Fail> {
    match cli.cmd {
        Cmd::Diagnose { files, format: fmt, rules, color, width, redact, threads } => {
            let engine = engine_with(&rules)?;
            let several = files.len() > 1 || files.iter().any(|p| p.is_dir());
            let file = files.first().cloned();
            let report = if redact {
                if several {
                    return Err(Fail(
                        "--redact reads one log file or standard input, not a folder or several files".into(),
                    ));
                }
                let mut d = engine.stream();
                input::redact_stream(
                    file.as_deref(),
                    |b: &[u8]| -> Result<(), Fail> {
                        d.feed(b);
                        Ok(())
                    },
                    Fail,
                )?;
                d.finish()
            } else if several {
                if files.iter().any(|p| p.as_os_str() == "-") {
                    return Err(Fail("standard input (`-`) cannot be read with other files".into()));
                }
                let threads =
                    threads.map_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()), usize::from);
                input::diagnose_paths(&engine, &files, threads).map_err(Fail)?
            } else {
                diagnose_input(&engine, &file)?
            };
            let color = match color {
                Color::Always => true,
                Color::Never => false,
                Color::Auto => io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
            };
            let text = match fmt {
                Format::Json => report.to_json() + "\n",
                Format::Md => report.to_markdown(),
                Format::Text => report.to_text_width(color, width.map_or_else(text_width, usize::from)),
            };
            out(&text)?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Explain { id, list, facts, format: fmt, rules } => {
            if facts {
                out(&docs::facts_markdown())?;
                return Ok(ExitCode::SUCCESS);
            }
            let engine = engine_with(&rules)?;
            if list || id.is_none() {
                out(&explain_list(&engine, fmt)?)?;
                return Ok(ExitCode::SUCCESS);
            }
            let id = id.unwrap_or_default();
            let Some(rule) = engine.pack().rule(&id) else {
                return Err(Fail(format!("no rule `{id}`; `torchdx explain --list` lists them")));
            };
            match fmt {
                Format::Json => out(&(serde_json::to_string_pretty(&rule.spec)? + "\n"))?,
                Format::Md => out(&docs::explain_markdown(rule))?,
                Format::Text => {
                    let color = io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
                    out(&torchdx_core::terminal_text(&docs::explain_markdown(rule), color, text_width()))?
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Eval { dir, json, verbose } => eval::run(&dir, json.as_deref(), verbose),
        Cmd::Redact { file } => {
            if stdout_was_closed() {
                return Err(Fail("standard output is closed: the redacted log cannot be written".into()));
            }
            let stdout = io::stdout();
            let mut o = io::BufWriter::with_capacity(1 << 16, stdout.lock());
            let write = |o: &mut io::BufWriter<io::StdoutLock<'_>>, b: &[u8]| match o.write_all(b) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(Fail::pipe_closed()),
                Err(e) => Err(Fail(format!("standard output: {e}"))),
            };
            let r = input::redact_stream(file.as_deref(), |b: &[u8]| write(&mut o, b), Fail)?;
            match o.flush() {
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Err(Fail::pipe_closed()),
                Err(e) => return Err(Fail(format!("standard output: {e}"))),
                Ok(()) => {}
            }
            let _ = writeln!(io::stderr(), "torchdx: {}", r.summary());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Rules { cmd } => rules(cmd),
    }
}

fn rules(cmd: RulesCmd) -> Result<ExitCode, Fail> {
    match cmd {
        RulesCmd::List { dir, rules } => {
            let engine = engine_with(&dir.or(rules))?;
            let mut s = String::new();
            for r in engine.pack().rules() {
                s.push_str(&format!("{:<28} {:<26} {}\n", r.id(), r.family(), docs::for_reader(&r.spec.title)));
            }
            out(&s)?;
            Ok(ExitCode::SUCCESS)
        }
        RulesCmd::Check { dir } => {
            let (report, n_files) = check_dir(&dir)?;
            let mut s = String::new();
            for d in &report.diagnostics {
                s.push_str(&d.report());
                s.push('\n');
            }
            let mut counts = [0usize; 5];
            for e in &report.examples {
                let (label, i) = match e.status {
                    Status::Validated => ("validated", 0),
                    Status::Missing => ("missing", 1),
                    Status::Noisy => ("noisy", 2),
                    Status::KnownMiss => ("a known miss (todo)", 3),
                    Status::Fixed => ("marked todo but now passes: remove `todo = true`", 4),
                };
                counts[i] += 1;
                if !matches!(e.status, Status::Validated | Status::KnownMiss) {
                    s.push_str(&format!(
                        "error: example `{}` of rule `{}` is {label}\n  --> {}:{}\n",
                        e.name, e.rule, e.file, e.line
                    ));
                    for d in &e.diffs {
                        s.push_str(&format!("   = {d}\n"));
                    }
                    s.push('\n');
                }
            }
            // After a file that did not parse, "no example ran" would be the same error again.
            let none_ran = report.examples.is_empty() && report.diagnostics.is_empty();
            if none_ran {
                s.push_str("error: no example ran: every rule needs [[example]] entries\n");
            }
            // The summary counts every error printed above it.
            let failing =
                report.examples.iter().filter(|e| !matches!(e.status, Status::Validated | Status::KnownMiss)).count();
            let problems = report.diagnostics.len() + failing + usize::from(none_ran);
            let todo = if counts[3] + counts[4] > 0 {
                format!(
                    ", {}, {}",
                    count(counts[3], "known miss", "known misses"),
                    count(counts[4], "fixed todo", "fixed todos")
                )
            } else {
                String::new()
            };
            let which = match rule_dir(&dir) {
                Some(d) => format!("{}: ", d.display()),
                None => "the built-in pack (compiled into this binary; give a folder to check yours): ".to_string(),
            };
            s.push_str(&format!(
                "{which}{}, {}: {} validated, {} missing, {} noisy{todo}; {}\n",
                count(n_files, "file", "files"),
                count(report.examples.len(), "example", "examples"),
                counts[0],
                counts[1],
                counts[2],
                count(problems, "problem", "problems")
            ));
            out(&s)?;
            Ok(if report.ok() { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        RulesCmd::Test { dir, bless } => scaffold::test(&rule_dir(&dir), bless),
        RulesCmd::New { id, dir } => scaffold::new_rule(&id, &dir),
        RulesCmd::Fmt { dir, check } => scaffold::fmt(&rule_dir(&dir), check),
        RulesCmd::Literals => {
            let mut s = String::new();
            for l in Engine::builtin().scan_literals() {
                s.push_str(&l);
                s.push('\n');
            }
            out(&s)?;
            Ok(ExitCode::SUCCESS)
        }
        RulesCmd::Bundle { out: file, module, absent_from } => {
            let pack = torchdx_core::builtin_precompiled();
            if let Some(wasm) = absent_from {
                let bytes = fs::read(&wasm).map_err(|e| Fail(format!("{}: {e}", wasm.display())))?;
                // Each rule's mechanism is specific to it (core's code quotes no rule text).
                let engine = Engine::builtin();
                let found: Vec<&str> = engine
                    .pack()
                    .rules()
                    .iter()
                    .filter(|r| r.spec.mechanism.len() >= 60)
                    .filter(|r| memchr::memmem::find(&bytes, r.spec.mechanism.trim().as_bytes()).is_some())
                    .map(|r| r.id())
                    .collect();
                if !found.is_empty() {
                    return Err(Fail(format!("{} embeds the rule text of {}", wasm.display(), found.join(", "))));
                }
                out(&format!("rule pack: not embedded in {}\n", wasm.display()))?;
            }
            if let Some(file) = file {
                let literal = serde_json::to_string(pack)?;
                let head =
                    "// torchdx's built-in rule pack, precompiled (JSON text). Generated by `torchdx rules bundle`.\n";
                let body = match module {
                    Module::Esm => format!("{head}export default {literal};\n"),
                    Module::Cjs => format!("{head}module.exports = {literal};\n"),
                };
                fs::write(&file, body).map_err(|e| Fail(format!("{}: {e}", file.display())))?;
                out(&format!("rule pack: {} bytes of JSON -> {}\n", pack.len(), file.display()))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        RulesCmd::Examples { dir: rules, out: dir } => {
            let engine = engine_with(&rule_dir(&rules))?;
            fs::create_dir_all(&dir).map_err(|e| Fail(format!("{}: {e}", dir.display())))?;
            let mut n = 0;
            for r in engine.pack().rules() {
                for (i, e) in r.spec.examples.iter().enumerate() {
                    let p = dir.join(format!("{}--{:02}-{}.log", r.id(), i, sanitize(&e.name)));
                    fs::write(&p, &e.log).map_err(|e| Fail(format!("{}: {e}", p.display())))?;
                    n += 1;
                }
            }
            out(&format!("wrote {n} example logs to {}\n", dir.display()))?;
            Ok(ExitCode::SUCCESS)
        }
        RulesCmd::Docs { dir: rules, out: dir, check } => {
            scaffold::docs(&*engine_with(&rule_dir(&rules))?, &dir, check)
        }
        RulesCmd::Schema { out: dir, check } => {
            let report = torchdx_core::report_schema();
            let rule = torchdx_core::spec::rule_schema();
            let parsed = |s: &str| serde_json::from_str::<serde_json::Value>(s).map_err(|e| Fail(e.to_string()));
            let dts = dts::declarations(&[&parsed(&report)?, &parsed(&rule)?]);
            let files = [
                ("report.schema.json", report),
                ("rule.schema.json", rule),
                ("ops.schema.json", torchdx_core::spec::ops_schema()),
                ("families.schema.json", torchdx_core::spec::families_schema()),
                ("notices.schema.json", torchdx_core::spec::notices_schema()),
                ("ingest.schema.json", torchdx_core::spec::ingest_schema()),
                ("codes.schema.json", torchdx_core::spec::codes_schema()),
                ("torchdx.d.ts", dts),
            ];
            scaffold::write_or_check(&dir, &files, check, "torchdx rules schema")
        }
    }
}

/// Runs `rules check` over DIR (or the built-in pack); returns the report and file count.
pub(crate) fn check_dir(dir: &Option<PathBuf>) -> Result<(check::CheckReport, usize), Fail> {
    match rule_dir(dir) {
        Some(d) => {
            let files = read_rule_dir(&d)?;
            let srcs = sources(&files);
            // A folder with its own families table is a whole pack (the built-in folder,
            // or a fork of it) and is checked alone; any other folder is an extra pack on
            // top of the built-in one.
            let whole = srcs.iter().any(|s| s.name.ends_with("data/families.toml"));
            let base = if whole { Vec::new() } else { torchdx_core::builtin_sources() };
            Ok((check::check(&srcs, &base), files.len()))
        }
        None => {
            let srcs = torchdx_core::builtin_sources();
            Ok((check::check(&srcs, &[]), srcs.len()))
        }
    }
}

fn sanitize(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' }).collect()
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("torchdx-write-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    /// A link planted where the temporary file goes (its first name, which a reader of
    /// this code can predict) is never written through: the write goes elsewhere, the
    /// link's target is untouched, and the file is written.
    #[test]
    fn the_temporary_file_is_never_written_through_a_link() {
        let d = tmp("tmp-link");
        let victim = d.join("victim.txt");
        fs::write(&victim, "keep me").unwrap();
        let rules = d.join("rules");
        fs::create_dir_all(&rules).unwrap();
        let file = rules.join("cuda-oom.toml");
        fs::write(&file, "old").unwrap();
        symlink(&victim, rules.join(format!(".cuda-oom.toml.{}-0.torchdx-tmp", std::process::id()))).unwrap();
        write_inside(&rules, &file, "new").unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "keep me");
        assert_eq!(fs::read_to_string(&file).unwrap(), "new");
        assert!(!fs::symlink_metadata(&file).unwrap().file_type().is_symlink());
        let _ = fs::remove_dir_all(&d);
    }

    /// `rules new` never creates a file through a link, even a dangling one.
    #[test]
    fn a_new_rule_is_never_written_through_a_dangling_link() {
        let d = tmp("new-link");
        let rules = d.join("rules");
        fs::create_dir_all(rules.join("schema")).unwrap();
        let outside = d.join("created-outside.toml");
        symlink(&outside, rules.join("widget-failed.toml")).unwrap();
        let Err(Fail(msg)) = scaffold::new_rule("widget-failed", &rules) else { panic!("written") };
        assert!(msg.contains("already exists"), "{msg}");
        assert!(!outside.exists());
        // The schema beside it: a dangling link is left alone, not written through.
        fs::remove_file(rules.join("widget-failed.toml")).unwrap();
        let schema_outside = d.join("created-schema.json");
        symlink(&schema_outside, rules.join("schema/rule.schema.json")).unwrap();
        scaffold::new_rule("widget-failed", &rules).unwrap();
        assert!(!schema_outside.exists());
        assert!(fs::read_to_string(rules.join("widget-failed.toml")).unwrap().contains("widget-failed"));
        let _ = fs::remove_dir_all(&d);
    }
}
