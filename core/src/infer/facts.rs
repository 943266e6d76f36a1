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

fn is_accel(d: &str) -> bool {
    !(d == "cpu" || d == "meta")
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
    // The op-argument role table.
    let op_name = ev.op.as_deref().or(role_op);
    let spec = op_name.and_then(|o| pack.op(o));
    let call: Option<&Call> = spec
        .and_then(|s| {
            line.calls.iter().find(|k| s.callees.iter().any(|n| k.callee.to_ascii_lowercase().contains(n.as_str())))
        })
        .or_else(|| line.calls.first());
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
                spec.args.first()
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
                flag(ctx, "role_settled", (named.is_some() || role_op.is_some()) && !code.is_empty());
            }
            text(ctx, "role_expr", expr);
        }
    }
    // No argument named (TensorIterator wording): a loss call on the failing line.
    if !role_found {
        if let Some(k) = call {
            let lower = k.callee.to_ascii_lowercase();
            if pack.loss_callees().iter().any(|n| lower.contains(n.as_str())) && k.args.len() >= 2 {
                text(ctx, "loss_target_expr", Some(pycall::base_name(&k.args[1]).to_string()));
                text(ctx, "loss_input_expr", Some(pycall::base_name(&k.args[0]).to_string()));
            }
        }
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
