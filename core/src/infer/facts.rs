//! Facts: what the engine can say about a failure beyond the message, as named values
//! that rule conditions and text read. Rust computes facts and nothing else; every
//! decision made from them is a `[[culprit_case]]` or `[[case]]` of a rule.
//!
//! - [`failing_line`]: for every rule, the call on the failing source line
//!   (`code_target`, `code_callee`, `code_arg0..2`), and a device a one-device message
//!   leaves out when the failing line moves a tensor (`model.to("cpu")`);
//! - [`device_placement`]: for rules that declare `facts = ["device-placement"]`, which
//!   devices meet, where the failure was raised (an optimizer step, DataParallel, a
//!   checkpoint load, accelerate's device map), and what the op-argument role table
//!   and the failing line say about the misplaced tensor.
//!
//! Every key is documented in [`crate::rules::facts::KEYS`]; a test checks that the
//! keys computed here are all listed there.

use serde_json::Value;

use crate::grammar::pycall::{self, Call, Line};
use crate::grammar::traceback::Frame;
use crate::report::Evidence;
use crate::rules::evidence::LogFacts;
use crate::rules::pack::Pack;
use crate::rules::text::Context;

/// Texts the device-placement facts ask about anywhere in the log.
pub(crate) const DEVICE_PLACEMENT_NEEDLES: &[&str] =
    &["load_state_dict", "LOCAL_RANK", "local_rank", "init_process_group"];

/// The failing line's outermost call, for rule text (`{code_arg1}` is the loss target),
/// and the device a one-device message leaves out: raised by a move on the failing line
/// (`model.to("cpu")`, meta to cpu), the move's target is the other device.
pub(crate) fn failing_line(ev: &mut Evidence, ctx: &mut Context) {
    let Some(code) = ev.failing_code.clone() else { return };
    let line = pycall::parse_line(&code);
    if let Some(devs) = ev.devices.clone().filter(|d| d.len() == 1) {
        let target = line.calls.iter().filter(|k| k.name() == "to" || k.name() == "to_empty").find_map(|k| {
            k.args
                .iter()
                .chain(k.kwargs.iter().filter(|(n, _)| n == "device").map(|(_, v)| v))
                .find_map(|a| device_literal(a))
        });
        if let Some(t) = target {
            let mut d = devs;
            d.push(t);
            ctx.insert("devices".into(), Value::from(d.clone()));
            ev.devices = Some(d);
        }
    }
    if let Some(t) = line.targets.first() {
        ctx.insert("code_target".into(), Value::from(t.clone()));
    }
    if let Some(k) = line.calls.first() {
        ctx.insert("code_callee".into(), Value::from(k.callee.clone()));
        for (i, a) in k.args.iter().take(3).enumerate() {
            ctx.insert(format!("code_arg{i}"), Value::from(pycall::base_name(a).to_string()));
        }
    }
}

/// Whether every frame shown is library code, and which library the innermost one below
/// torch is: facts of every finding with frames (a fault inside a library's own code).
pub(crate) fn library_frames(pack: &Pack, frames: &[&Frame], ctx: &mut Context) {
    let library_of = |f: &Frame| library_package(&f.file, f.is_user(), pack.library_packages());
    let libs: Vec<Option<String>> = frames.iter().map(|f| library_of(f)).collect();
    flag(ctx, "frames_all_library", !libs.is_empty() && libs.iter().all(Option::is_some));
    let library = libs
        .iter()
        .rev()
        .flatten()
        .find(|l| *l != "torch" && *l != "python")
        .or_else(|| libs.iter().rev().flatten().next());
    text(ctx, "library", library.cloned());
}

fn is_accel(d: &str) -> bool {
    !(d == "cpu" || d == "meta")
}

/// The accelerator a bare `.cuda()` / `"cuda"` means: index 0, or no index.
fn is_default_accel(d: &str) -> bool {
    !d.contains(':') || d.ends_with(":0")
}

fn flag(ctx: &mut Context, name: &str, holds: bool) {
    if holds {
        ctx.insert(name.into(), Value::Bool(true));
    }
}

fn text(ctx: &mut Context, name: &str, value: Option<String>) {
    if let Some(v) = value.filter(|v| !v.is_empty()) {
        ctx.insert(name.into(), Value::from(v));
    }
}

/// The device-placement facts of a finding (see the module docs).
pub(crate) fn device_placement(
    pack: &Pack,
    ev: &Evidence,
    frames: &[&Frame],
    log: &LogFacts<'_>,
    role_op: Option<&str>,
    ctx: &mut Context,
) {
    let devices: Vec<String> = ev.devices.clone().unwrap_or_default();
    let code = ev.failing_code.clone().unwrap_or_default();
    let line = pycall::parse_line(&code);
    let frame_has = |n: &str| {
        frames.iter().any(|f| f.file.replace('\\', "/").contains(n) || f.func.as_deref().is_some_and(|x| x.contains(n)))
    };
    // The device the computation runs on, and the stray one.
    let (target, stray) = match devices.as_slice() {
        [a, b, ..] if a == "meta" || b == "meta" => {
            let other = if a == "meta" { b } else { a };
            (other.clone(), "meta".to_string())
        }
        [a, b, ..] if is_accel(a) && !is_accel(b) => (a.clone(), b.clone()),
        [a, b, ..] if !is_accel(a) && is_accel(b) => (b.clone(), a.clone()),
        // Two GPUs, one the default (`cuda:0`, bare `cuda`) and one an explicit other
        // index: the run chose the explicit one, and the side on the default did not follow.
        [a, b, ..] if is_default_accel(a) && !is_default_accel(b) => (b.clone(), a.clone()),
        [a, b, ..] => (a.clone(), b.clone()),
        _ => (String::new(), String::new()),
    };
    if !target.is_empty() {
        ctx.insert("target_device".into(), Value::from(target.clone()));
        ctx.insert("stray_device".into(), Value::from(stray.clone()));
        let pair = if stray == "meta" {
            "meta"
        } else if is_accel(&target) && is_accel(&stray) && target != stray {
            "two-accelerators"
        } else if target != stray {
            "accel-vs-host"
        } else {
            "same"
        };
        ctx.insert("device_pair".into(), Value::from(pair));
    }
    flag(ctx, "log_loads_state_dict", log.contains("load_state_dict"));
    flag(
        ctx,
        "distributed",
        log.distributed
            || log.contains("LOCAL_RANK")
            || log.contains("local_rank")
            || log.contains("init_process_group")
            || frame_has("torch/distributed")
            || frame_has("torch/nn/parallel/distributed"),
    );
    flag(
        ctx,
        "loads_checkpoint",
        frame_has("torch/serialization.py") || (code.contains("torch.load(") && !code.contains("map_location")),
    );
    flag(ctx, "in_dataparallel", frame_has("data_parallel") || frame_has("replicate") || frame_has("parallel_apply"));
    flag(ctx, "in_optimizer_step", frames.last().is_some_and(|f| f.file.replace('\\', "/").contains("torch/optim/")));
    flag(ctx, "in_hf_device_map", frame_has("accelerate/hooks") || frame_has("accelerate/big_modeling"));
    // Whether the failing user frame is a module's `forward`.
    let in_forward = frames
        .iter()
        .rev()
        .find(|f| f.is_user())
        .and_then(|f| f.func.as_deref())
        .is_some_and(|f| f.contains("forward"));
    flag(ctx, "in_forward", in_forward);
    text(ctx, "audit", audit_snippet(&line));
    text(ctx, "self_attribute", plain_self_attribute(&code));
    // A factory call on the failing line without `device=`.
    let factory = line.calls.iter().find(|k| {
        (k.callee.starts_with("torch.") || k.callee.starts_with("np."))
            && pack.factories().iter().any(|f| f == k.name())
            && !k.kwargs.iter().any(|(k, _)| k == "device")
    });
    text(ctx, "factory_call", factory.map(|fc| format!("{}({})", fc.callee, fc.args.join(", "))));
    // The same call creating on the device of `x`, a tensor already on the right one.
    text(
        ctx,
        "factory_call_on_device",
        factory.map(|fc| {
            let mut args: Vec<String> = fc.args.clone();
            args.extend(fc.kwargs.iter().map(|(k, v)| format!("{k}={v}")));
            args.push("device=x.device".into());
            format!("{}({})", fc.callee, args.join(", "))
        }),
    );
    // The op-argument role table.
    let op_name = ev.op.as_deref().or(role_op);
    // A message that names an argument but no op reads the `*` row: its roles by name.
    let named_op = op_name.and_then(|o| pack.op(o));
    let generic = named_op.is_none() && ev.argument.is_some();
    let spec = named_op.or_else(|| if generic { pack.op("*") } else { None });
    // The call on the line that runs the op: one the role table names for it, else the
    // first to run among the calls that can run a tensor op at all (`print`, `.view`,
    // `F.gelu` cannot: `data/ops.toml` lists them). `one_call` when no other could.
    let candidates: Vec<&Call> =
        line.calls.iter().filter(|k| !pack.inert_callees().iter().any(|n| n == k.name())).collect();
    let named_calls: Vec<&Call> = spec
        .map(|s| {
            let lower = |k: &Call| k.callee.to_ascii_lowercase();
            candidates.iter().copied().filter(|k| s.callees.iter().any(|n| lower(k).contains(n.as_str()))).collect()
        })
        .unwrap_or_default();
    let one_call = named_calls.len() == 1 || (named_calls.is_empty() && candidates.len() == 1);
    let call: Option<&Call> =
        named_calls.first().copied().or_else(|| first_to_run(&candidates)).or_else(|| line.calls.first());
    // The other calls that could have run it, when the line leaves a choice.
    let pool = if named_calls.is_empty() { &candidates } else { &named_calls };
    let others: Vec<&str> =
        pool.iter().filter(|k| call.is_none_or(|c| !std::ptr::eq(**k, c))).map(|k| k.callee.as_str()).collect();
    let mut role_found = false;
    if let Some(spec) = spec.filter(|_| !stray.is_empty()) {
        // The misplaced tensor: the named argument when it is on the stray device, else
        // the first tensor argument (it set the "common" device). Without a named
        // argument, devices are listed in the op's argument order.
        let argument = ev.argument.as_deref();
        let named = argument.and_then(|a| spec.args.iter().find(|r| r.name == a));
        let role = if argument.is_some() {
            if ev.text("argument_device") == Some(stray.as_str()) {
                named
            } else {
                // The other side: the argument the message compares it with when it names
                // one (`... as tensor for argument #2 'weight'`), else the first tensor.
                let other = ev.text("other_argument").and_then(|o| spec.args.iter().find(|r| r.name == o));
                other.or(spec.args.first())
            }
        } else {
            devices.iter().position(|d| *d == stray).and_then(|i| spec.args.get(i))
        };
        if let Some(role) = role {
            role_found = true;
            ctx.insert("role_kind".into(), Value::from(role.kind.clone()));
            ctx.insert("role".into(), Value::from(role.role.clone()));
            ctx.insert("op_user_call".into(), Value::from(spec.user_call.clone()));
            flag(ctx, "role_in_call", role.call_arg.is_some());
            let expr = match (role.call_arg, call) {
                (Some(i), Some(k)) => k.args.get(i).map(|a| pycall::base_name(a).to_string()),
                (None, Some(k)) if !k.callee.starts_with("torch.") && !k.callee.starts_with("F.") => {
                    Some(k.callee.clone())
                }
                _ => None,
            };
            let reference = call.and_then(|k| {
                spec.args
                    .iter()
                    .filter(|a| a.name != role.name)
                    .find_map(|a| a.call_arg.and_then(|i| k.args.get(i)).map(|x| pycall::base_name(x).to_string()))
            });
            text(ctx, "role_reference_expr", reference);
            if let Some(e) = &expr {
                // An argument that is a plain attribute (`self.mask`), not a called module.
                flag(ctx, "role_expr_self_attr", role.call_arg.is_some() && e.starts_with("self.") && !e.contains('('));
                flag(ctx, "role_expr_subscript", e.contains('['));
                flag(ctx, "role_expr_local", !e.starts_with("self.") && !e.contains('.'));
                let settled = (named.is_some() || role_op.is_some()) && !code.is_empty() && one_call && !generic;
                flag(ctx, "role_settled", settled);
                text(ctx, "role_other_calls", (!one_call && !others.is_empty()).then(|| others.join("`, `")));
            }
            text(ctx, "role_expr", expr);
        }
    }
    // No argument named (TensorIterator wording): a loss call on the failing line.
    if !role_found {
        let is_loss = |k: &&&Call| {
            let lower = k.callee.to_ascii_lowercase();
            pack.loss_callees().iter().any(|n| lower.contains(n.as_str())) && k.args.len() >= 2
        };
        if let Some(k) = candidates.iter().find(is_loss) {
            text(ctx, "loss_target_expr", Some(pycall::base_name(&k.args[1]).to_string()));
            text(ctx, "loss_input_expr", Some(pycall::base_name(&k.args[0]).to_string()));
        }
    }
}

/// The call Python runs first among `calls` (outermost first, as written): the first
/// whose arguments hold none of the others (`self.proj` in `self.head(F.gelu(self.proj(x)))`,
/// `describe` in `print(describe(net, batch))`).
fn first_to_run<'a>(calls: &[&'a Call]) -> Option<&'a Call> {
    let holds = |outer: &Call, inner: &Call| {
        let needle = format!("{}(", inner.callee);
        outer.args.iter().chain(outer.kwargs.iter().map(|(_, v)| v)).any(|a| a.contains(&needle))
    };
    calls
        .iter()
        .copied()
        .find(|k| !calls.iter().any(|o| !std::ptr::eq(*o, *k) && holds(k, o)))
        .or(calls.first().copied())
}

/// The installed package a frame's file belongs to: the directory after `site-packages/`
/// (or `dist-packages/`), or for a package-relative path (`diffusers/models/x.py`) its
/// first directory when that is a listed library; `torch` or `python` (the standard
/// library, `<frozen ...>`) for the other non-user frames. `None` for the user's own code.
fn library_package(file: &str, is_user: bool, listed: &[String]) -> Option<String> {
    let path = file.replace('\\', "/");
    let after = ["site-packages/", "dist-packages/"].iter().find_map(|m| path.rfind(m).map(|i| &path[i + m.len()..]));
    let first = |p: &str| p.trim_start_matches("./").split('/').next().unwrap_or("").to_string();
    match after {
        Some(rest) => Some(first(rest)).filter(|p| !p.is_empty()),
        None if listed.iter().any(|l| first(&path) == *l) && path.contains('/') => Some(first(&path)),
        // Torch itself, the standard library, `<frozen ...>`, console scripts.
        None if !is_user => {
            let torch = path.starts_with("torch/") || path.contains("/torch/");
            Some(if torch { "torch" } else { "python" }.to_string())
        }
        None => None,
    }
}

/// The first `self.name` on a source line used as a value, not called (`x * self.mask`).
fn plain_self_attribute(code: &str) -> Option<String> {
    let mut from = 0;
    while let Some(i) = code[from..].find("self.") {
        let start = from + i;
        let rest = &code[start + 5..];
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '.').collect();
        let after = rest[name.len()..].trim_start();
        let name = name.trim_end_matches('.');
        if !name.is_empty() && !after.starts_with('(') && !after.starts_with('=') {
            return Some(format!("self.{name}"));
        }
        from = start + 5;
    }
    None
}

/// A ready-to-paste audit of the tensors on the failing line.
fn audit_snippet(line: &Line) -> Option<String> {
    let mut names: Vec<String> = Vec::new();
    for k in &line.calls {
        for a in k.args.iter().chain(k.kwargs.iter().map(|(_, v)| v)) {
            let b = pycall::base_name(a);
            if !b.is_empty()
                && b.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
                && !b.contains('(')
                && !names.iter().any(|n| n == b)
            {
                names.push(b.to_string());
            }
        }
    }
    if names.is_empty() {
        return None;
    }
    let pairs: Vec<String> = names.iter().map(|n| format!("(\"{}\", {n})", n.replace('"', "'"))).collect();
    Some(format!(
        "Print the device of each operand just before the failing line: `for name, t in [{}]: print(name, getattr(t, \"device\", type(t)))`",
        pairs.join(", ")
    ))
}

/// A device written as a literal argument: `"cpu"`, `'cuda:1'`, `torch.device("cuda", 0)`.
fn device_literal(arg: &str) -> Option<String> {
    let a = arg.trim();
    let inner = a.strip_prefix("torch.device(").and_then(|x| x.strip_suffix(')')).unwrap_or(a);
    let mut parts = inner.split(',').map(|p| p.trim().trim_matches(['"', '\'']));
    let kind = parts.next()?;
    let idx = parts.next().filter(|i| i.chars().all(|c| c.is_ascii_digit()) && !i.is_empty());
    let text = match idx {
        Some(i) => format!("{kind}:{i}"),
        None => kind.to_string(),
    };
    let quoted = a.starts_with('"') || a.starts_with('\'') || a.starts_with("torch.device(");
    match crate::grammar::atoms::device(&text) {
        Ok(("", d)) if quoted => Some(d),
        _ => None,
    }
}

#[cfg(all(test, feature = "builtin"))]
mod tests {
    use super::*;
    use crate::rules::facts::KEYS;

    struct Case {
        name: &'static str,
        devices: &'static [&'static str],
        argument: Option<&'static str>,
        op: Option<&'static str>,
        code: &'static str,
        frames: &'static [&'static str],
        /// Facts that must hold, as `key=value` (a flag: `key`).
        want: &'static [&'static str],
        /// Facts that must be absent.
        not: &'static [&'static str],
    }

    const CASES: &[Case] = &[
        Case {
            name: "labels on the cpu, named by the loss kernel",
            devices: &["cuda:0", "cpu"],
            argument: Some("target"),
            op: Some("nll_loss_forward"),
            code: "loss = criterion(outputs, labels)",
            frames: &["/home/u/train.py"],
            want: &[
                "target_device=cuda:0",
                "stray_device=cpu",
                "device_pair=accel-vs-host",
                "role_kind=label-not-moved",
                "role=the labels",
                "role_expr=labels",
                "role_in_call",
                "role_settled",
                "role_expr_local",
                "role_reference_expr=outputs",
            ],
            not: &["loss_target_expr", "loads_checkpoint", "factory_call"],
        },
        Case {
            name: "a module's weight left behind",
            devices: &["cuda:0", "cpu"],
            argument: Some("mat2"),
            op: Some("addmm"),
            code: "h = self.proj(x)",
            frames: &["/home/u/model.py"],
            want: &["role_kind=model-not-moved", "role_expr=self.proj", "role_settled"],
            not: &["role_in_call", "role_expr_self_attr", "role_expr_subscript"],
        },
        Case {
            name: "two gpus and a checkpoint loaded on the failing line",
            devices: &["cuda:1", "cuda:0"],
            argument: None,
            op: None,
            code: "x = x - torch.load(path)[\"mean\"]",
            frames: &["/job/train.py"],
            want: &["device_pair=two-accelerators", "loads_checkpoint", "target_device=cuda:1", "stray_device=cuda:0"],
            not: &["role_kind"],
        },
        Case {
            name: "a factory without device=",
            devices: &["cuda:0", "cpu"],
            argument: None,
            op: None,
            code: "mask = torch.ones(4, 4) * x",
            frames: &["/home/u/model.py"],
            want: &["factory_call=torch.ones(4, 4)"],
            not: &["loss_target_expr"],
        },
        Case {
            name: "raised in an optimizer step",
            devices: &["cuda:0", "cpu"],
            argument: None,
            op: None,
            code: "optimizer.step()",
            frames: &["/home/u/train.py", "/venv/lib/python3.11/site-packages/torch/optim/adam.py"],
            want: &["in_optimizer_step"],
            not: &["in_dataparallel"],
        },
        Case {
            name: "no argument, a loss call on the line",
            devices: &["cuda:0", "cpu"],
            argument: None,
            op: None,
            code: "loss = loss_fn(logits, y)",
            frames: &["/home/u/train.py"],
            want: &["loss_target_expr=y", "loss_input_expr=logits"],
            not: &["role_kind"],
        },
        Case {
            name: "the call that runs the op, not the outermost (nested modules)",
            devices: &["cuda:0", "cpu"],
            argument: Some("mat2"),
            op: Some("addmm"),
            code: "y = self.head(F.gelu(self.proj(x)))",
            frames: &["/home/u/model.py"],
            want: &["role_kind=model-not-moved", "role_expr=self.proj"],
            // self.head could run addmm too: not settled.
            not: &["role_settled"],
        },
        Case {
            name: "a builtin around the call that runs the model",
            devices: &["cuda:0", "cpu"],
            argument: Some("mat1"),
            op: Some("addmm"),
            code: "print(describe(net, batch))",
            frames: &["/home/u/report.py"],
            want: &["role_kind=input-not-moved", "role_expr=net", "role_settled"],
            not: &[],
        },
        Case {
            name: "views and moves on the line are not candidates",
            devices: &["cuda:0", "cpu"],
            argument: Some("mat1"),
            op: Some("addmm"),
            code: "out = self.fc(x.view(x.size(0), -1).float())",
            frames: &["/home/u/model.py"],
            want: &["role_expr=x", "role_settled"],
            not: &[],
        },
        Case {
            name: "a loss inside a builtin",
            devices: &["cuda:0", "cpu"],
            argument: None,
            op: None,
            code: "print(float(loss_fn(pred, target)))",
            frames: &["/home/u/train.py"],
            want: &["loss_target_expr=target", "loss_input_expr=pred"],
            not: &["role_kind"],
        },
        Case {
            name: "package-relative library frames",
            devices: &["cuda:0", "cpu"],
            argument: None,
            op: None,
            code: "return (latent + pos_embed).to(latent.dtype)",
            frames: &[
                "diffusers/models/transformers/sana.py",
                "torch/nn/modules/module.py",
                "diffusers/models/embeddings.py",
            ],
            want: &["frames_all_library", "library=diffusers"],
            not: &[],
        },
        Case {
            name: "a user frame is not a library's",
            devices: &["cuda:0", "cpu"],
            argument: None,
            op: None,
            code: "out = model(x)",
            frames: &["/home/u/models/train.py", "/venv/lib/python3.11/site-packages/timm/models/vit.py"],
            want: &["library=timm"],
            not: &["frames_all_library"],
        },
        Case {
            name: "a meta weight",
            devices: &["meta", "cuda:0"],
            argument: None,
            op: None,
            code: "out = model(x)",
            frames: &["/home/u/infer.py"],
            want: &["device_pair=meta", "target_device=cuda:0", "stray_device=meta"],
            not: &[],
        },
    ];

    fn frame(file: &str) -> Frame {
        Frame { file: file.into(), line: Some(1), func: Some("forward".into()), code: None, at: 0 }
    }

    #[test]
    fn device_placement_facts() {
        let pack = crate::builtin_pack().unwrap();
        for c in CASES {
            let mut ev = Evidence::new();
            ev.devices = Some(c.devices.iter().map(|d| d.to_string()).collect());
            ev.argument = c.argument.map(str::to_string);
            ev.op = c.op.map(str::to_string);
            ev.failing_code = Some(c.code.into());
            crate::rules::evidence::derive(&mut ev);
            let frames: Vec<Frame> = c.frames.iter().map(|f| frame(f)).collect();
            let refs: Vec<&Frame> = frames.iter().collect();
            let log = LogFacts { needles: &[], seen: &[], distributed: false, topology: Default::default() };
            let mut ctx = Context::new();
            device_placement(&pack, &ev, &refs, &log, None, &mut ctx);
            library_frames(&pack, &refs, &mut ctx);
            for w in c.want {
                let (k, v) = w.split_once('=').unwrap_or((w, "true"));
                let got = ctx.get(k).map(crate::report::value_text);
                assert_eq!(got.as_deref(), Some(v), "{}: {k}\n{ctx:#?}", c.name);
            }
            for k in c.not {
                assert!(!ctx.contains_key(*k), "{}: {k} should be absent\n{ctx:#?}", c.name);
            }
            for k in ctx.keys() {
                assert!(KEYS.iter().any(|x| x.name == k), "{}: fact `{k}` is not in rules::facts::KEYS", c.name);
            }
        }
    }
}
