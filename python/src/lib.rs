//! `torchdx._native`: the torchdx engine as a CPython extension module (PyO3, abi3).
//!
//! A thin layer: every diagnosis is `torchdx_core`'s, every file and folder is read the
//! way the `torchdx` command reads it (`torchdx::input`), and the command itself runs in
//! process through `torchdx::main_from`. The typed Python objects (`torchdx.Report`, ...)
//! are built in Python from the report's JSON (the `torchdx/report@1` contract), so the
//! two can never disagree on a field.
//!
//! The GIL is released while the engine works: a 1 GiB log takes about a second, and
//! other Python threads (a training loop's, a notebook's) keep running meanwhile.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use torchdx_core::{Engine, Report, SharedDiagnoser};

/// The engine for a rules folder (or the built-in pack), as the CLI builds it.
fn engine(rules_dir: Option<&str>) -> PyResult<Engine> {
    let dir = rules_dir.map(PathBuf::from);
    torchdx::engine_for(&dir).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// An engine report. Render it, or read its JSON.
#[pyclass(frozen, module = "torchdx._native")]
struct NativeReport {
    report: Report,
}

#[pymethods]
impl NativeReport {
    /// The `torchdx/report@1` JSON: compact, or indented with `pretty=True`.
    #[pyo3(signature = (pretty = false))]
    fn to_json(&self, pretty: bool) -> String {
        if pretty {
            serde_json::to_string_pretty(&self.report).unwrap_or_else(|_| self.report.to_json())
        } else {
            self.report.to_json()
        }
    }

    /// The text `torchdx diagnose` prints (ANSI colours when `color`), wrapped to
    /// `width` columns (code lines are never broken; no column is narrower than 24).
    #[pyo3(signature = (color = false, width = 100))]
    fn to_text(&self, color: bool, width: usize) -> String {
        self.report.to_text_width(color, width)
    }

    /// The Markdown report, for an issue or a chat message.
    fn to_markdown(&self) -> String {
        self.report.to_markdown()
    }

    /// False when there is no finding, or only unrecognised exceptions the engine knows
    /// nothing specific about (an exception hook then prints nothing extra).
    fn has_useful_finding(&self) -> bool {
        self.report.findings.iter().any(|f| f.id != "unrecognized-exception")
    }

    /// A report read back from its JSON (as `to_json` wrote it).
    #[staticmethod]
    fn from_json(json: &str) -> PyResult<NativeReport> {
        let report = serde_json::from_str(json).map_err(|e| PyValueError::new_err(format!("report JSON: {e}")))?;
        Ok(NativeReport { report })
    }

    fn __repr__(&self) -> String {
        let head = self.report.primary().map(|f| f.family.as_str()).unwrap_or("no finding");
        format!("<NativeReport {} finding(s), {head}>", self.report.findings.len())
    }
}

/// Diagnoses a log given as bytes. A bad rules folder raises `ValueError` naming the
/// file and line.
#[pyfunction]
#[pyo3(signature = (data, rules_dir = None))]
fn diagnose(py: Python<'_>, data: Vec<u8>, rules_dir: Option<&str>) -> PyResult<NativeReport> {
    NativeEngine::new(rules_dir)?.diagnose(py, data)
}

/// An engine built once (the rule pack compiled, its automata built: about 2 ms, more
/// with a rules folder) and shared by every diagnosis made with it, from any thread.
#[pyclass(frozen, name = "Engine", module = "torchdx._native")]
struct NativeEngine {
    engine: Arc<Engine>,
}

#[pymethods]
impl NativeEngine {
    #[new]
    #[pyo3(signature = (rules_dir = None))]
    fn new(rules_dir: Option<&str>) -> PyResult<NativeEngine> {
        Ok(NativeEngine { engine: Arc::new(engine(rules_dir)?) })
    }

    /// Diagnoses a log given as bytes (gzip or zstd bytes are decompressed first).
    fn diagnose(&self, py: Python<'_>, data: Vec<u8>) -> PyResult<NativeReport> {
        let report = py.detach(|| torchdx::input::diagnose_bytes(&self.engine, &data));
        report.map(|report| NativeReport { report }).map_err(PyValueError::new_err)
    }

    /// Diagnoses a file or a `torchrun --log-dir` folder.
    fn diagnose_file(&self, py: Python<'_>, path: &str) -> PyResult<NativeReport> {
        let path = Path::new(path).to_path_buf();
        let report = py.detach(|| torchdx::input::diagnose_path(&self.engine, &path));
        report.map(|report| NativeReport { report }).map_err(|e| PyOSError::new_err(e.to_string()))
    }

    /// A streaming diagnosis on this engine.
    fn diagnoser(&self) -> Diagnoser {
        Diagnoser { inner: Mutex::new(Some(SharedDiagnoser::new(self.engine.clone()))) }
    }
}

/// Diagnoses a file (streamed; `.gz` and `.zst` are decompressed) or a `torchrun
/// --log-dir` folder. An unreadable path raises `OSError`.
#[pyfunction]
#[pyo3(signature = (path, rules_dir = None))]
fn diagnose_file(py: Python<'_>, path: &str, rules_dir: Option<&str>) -> PyResult<NativeReport> {
    NativeEngine::new(rules_dir)?.diagnose_file(py, path)
}

/// Incremental diagnosis: `feed` chunks of any size, cut anywhere, then `finish`.
/// Memory stays bounded whatever the input's size.
#[pyclass(module = "torchdx._native")]
struct Diagnoser {
    // `None` once finished. A Mutex, not a RefCell: the object may be shared between
    // Python threads, and the GIL is released while a chunk is scanned.
    inner: Mutex<Option<SharedDiagnoser>>,
}

#[pymethods]
impl Diagnoser {
    #[new]
    #[pyo3(signature = (rules_dir = None))]
    fn new(rules_dir: Option<&str>) -> PyResult<Diagnoser> {
        let engine = Arc::new(engine(rules_dir)?);
        Ok(Diagnoser { inner: Mutex::new(Some(SharedDiagnoser::new(engine))) })
    }

    fn feed(&self, py: Python<'_>, data: Vec<u8>) -> PyResult<()> {
        py.detach(|| {
            let mut g = self.inner.lock().map_err(|_| PyRuntimeError::new_err("Diagnoser: poisoned"))?;
            match g.as_mut() {
                Some(d) => {
                    d.feed(&data);
                    Ok(())
                }
                None => Err(PyRuntimeError::new_err("Diagnoser.feed after finish")),
            }
        })
    }

    fn finish(&self, py: Python<'_>) -> PyResult<NativeReport> {
        py.detach(|| {
            let d = self.inner.lock().map_err(|_| PyRuntimeError::new_err("Diagnoser: poisoned"))?.take();
            match d {
                Some(d) => Ok(NativeReport { report: d.finish() }),
                None => Err(PyRuntimeError::new_err("Diagnoser.finish called twice")),
            }
        })
    }
}

/// Runs the `torchdx` command in process (`argv` without the program name) and returns
/// its exit status. Output goes to file descriptors 1 and 2, as the binary's does.
#[pyfunction]
fn cli_main(py: Python<'_>, argv: Vec<String>) -> i32 {
    py.detach(|| torchdx::main_from(std::iter::once("torchdx".to_string()).chain(argv)))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<NativeReport>()?;
    m.add_class::<Diagnoser>()?;
    m.add_class::<NativeEngine>()?;
    m.add_function(wrap_pyfunction!(diagnose, m)?)?;
    m.add_function(wrap_pyfunction!(diagnose_file, m)?)?;
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    Ok(())
}
