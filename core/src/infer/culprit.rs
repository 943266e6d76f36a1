//! The culprit of a device-placement failure: which tensor or module is on the wrong
//! device, from the op-argument role table and the call on the failing line.

use crate::grammar::pycall;
use crate::grammar::traceback::Frame;
use crate::report::{Confidence, Evidence};
use crate::rules::evidence::LogFacts;
use crate::rules::pack::Pack;

/// What the engine inferred about a device-placement culprit.
#[derive(Clone, Debug)]
pub(super) struct DeviceCulprit {
    pub kind: String,
    pub expr: Option<String>,
    pub summary: String,
    pub confidence: Confidence,
    pub missing: Vec<String>,
    pub next_action: Option<String>,
    /// Extra placeholder values: `stray_device`, `target_device`, `culprit_role`, `reference_expr`.
    pub ctx: Vec<(String, String)>,
}

fn is_accel(d: &str) -> bool {
    !(d == "cpu" || d == "meta")
}

/// Factory calls that create a tensor on the default device unless told otherwise.
const FACTORIES: &[&str] = &[
    "zeros",
    "ones",
    "arange",
    "tensor",
    "full",
    "randn",
    "rand",
    "randint",
    "empty",
    "eye",
    "linspace",
    "zeros_like_cpu",
    "as_tensor",
    "from_numpy",
];

pub(super) fn device_culprit(
    pack: &Pack,
    ev: &Evidence,
    frames: &[&Frame],
    log: &LogFacts<'_>,
    role_op: Option<&str>,
) -> Option<DeviceCulprit> {
    let devices: Vec<String> = ev.devices.clone().unwrap_or_default();
    let s = |k: &str| ev.text(k).map(str::to_string);
    let argument = s("argument");
    let op = s("op");
    let code = s("failing_code").unwrap_or_default();
    let line = pycall::parse_line(&code);
    // Whether the failing user frame is a module's `forward`.
    let in_forward = frames
        .iter()
        .rev()
        .find(|f| f.is_user())
        .and_then(|f| f.func.as_deref())
        .is_some_and(|f| f.contains("forward"));
    let frame_has = |n: &str| {
        frames.iter().any(|f| f.file.replace('\\', "/").contains(n) || f.func.as_deref().is_some_and(|x| x.contains(n)))
    };
    let mut c = DeviceCulprit {
        kind: "other".into(),
        expr: None,
        summary: String::new(),
        confidence: Confidence::Possible,
        missing: Vec::new(),
        next_action: None,
        ctx: Vec::new(),
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
        c.ctx.push(("target_device".into(), target.clone()));
        c.ctx.push(("stray_device".into(), stray.clone()));
    }
    let audit = audit_snippet(&line);
    // Meta tensors: parameters never materialised.
    if stray == "meta" || ev.message.as_deref().is_some_and(|m| m.contains("device meta")) {
        c.kind = "meta-weights".into();
        c.expr = if log.contains("load_state_dict") { Some("model.load_state_dict(state_dict)".into()) } else { None };
        c.summary = format!(
            "some parameters or buffers are still on the meta device (no data) while the computation runs on {}: the model was built under `torch.device(\"meta\")` or with `low_cpu_mem_usage`/`init_empty_weights`, and its weights were never materialised{}",
            if target.is_empty() { "a real device".into() } else { target.clone() },
            if log.contains("load_state_dict") { "; `load_state_dict` without `assign=True` copies into meta tensors, which is a no-op" } else { "" }
        );
        c.confidence = Confidence::Likely;
        c.next_action = Some("Print the parameters still on meta: `print([n for n, p in model.named_parameters() if p.is_meta] + [n for n, b in model.named_buffers() if b.is_meta])`.".into());
        return Some(c);
    }
    // Two different accelerators: a rank or device-index problem.
    if is_accel(&target) && is_accel(&stray) && target != stray {
        let distributed = log.distributed
            || log.contains("LOCAL_RANK")
            || log.contains("local_rank")
            || log.contains("init_process_group")
            || frame_has("torch/distributed")
            || frame_has("torch/nn/parallel/distributed");
        let loads =
            frame_has("torch/serialization.py") || (code.contains("torch.load(") && !code.contains("map_location"));
        if loads {
            c.kind = "checkpoint-map-location".into();
            c.summary = format!("tensors loaded from a checkpoint came back on the device they were saved from ({stray}) while this process computes on {target}: `torch.load` without `map_location` restores each tensor to its original device");
            c.expr = Some("torch.load(...)".into());
        } else if frame_has("data_parallel") || frame_has("replicate") || frame_has("parallel_apply") {
            c.kind = "dataparallel-replica".into();
            c.summary = format!("inside `nn.DataParallel` a tensor on {stray} meets a replica on {target}: something the module's forward uses is not a registered parameter or buffer, so it was not copied to each replica");
        } else if distributed {
            c.kind = "wrong-local-rank".into();
            c.summary = format!("one process uses both {target} and {stray}: a tensor was placed with a hardcoded or global device index instead of this process's local rank");
        } else {
            c.kind = "hardcoded-device".into();
            c.summary = format!("tensors on {target} and {stray} meet in one operation: one of them was placed with a hardcoded device index");
        }
        c.confidence = Confidence::Likely;
        c.missing.push("The device of each operand on the failing line".into());
        c.next_action = audit.clone();
        return Some(c);
    }
    // Library internals: optimizer state, DataParallel, HF device maps.
    // Raised inside an optimizer step: the optimizer's own state is on the wrong device.
    if frames.last().is_some_and(|f| f.file.replace('\\', "/").contains("torch/optim/")) {
        c.kind = "optimizer-state".into();
        c.expr = Some("optimizer.state".into());
        c.summary = format!("the optimizer's state tensors (exp_avg, momentum_buffer, step) are on {stray} while the parameters are on {target}: the optimizer state was loaded or created before `model.to(...)`, or loaded from a checkpoint without `map_location`");
        c.confidence = Confidence::Likely;
        c.next_action = Some("Print the devices of the optimizer state: `print({k: v.device for s in optimizer.state.values() for k, v in s.items() if torch.is_tensor(v)})`.".into());
        return Some(c);
    }
    if frame_has("accelerate/hooks") || frame_has("accelerate/big_modeling") {
        c.kind = "hf-device-map".into();
        c.summary = format!("an accelerate/transformers `device_map` hook placed part of the model on {stray} and part on {target}, and an input or a manually added module did not follow the map");
        c.confidence = Confidence::Likely;
        c.next_action = Some("Print `model.hf_device_map` and move the inputs to the device of the first module (`inputs.to(model.device)`).".into());
        return Some(c);
    }
    if frame_has("data_parallel") || frame_has("parallel_apply") || frame_has("replicate.py") {
        c.kind = "dataparallel-replica".into();
        c.summary = format!("inside `nn.DataParallel` a tensor on {stray} meets a replica on {target}: a tensor the forward uses is a plain attribute, not a registered buffer, so it is not copied to each replica");
        c.confidence = Confidence::Likely;
        c.next_action = Some(
            "Register the tensor with `self.register_buffer(name, tensor)` (or use DistributedDataParallel).".into(),
        );
        return Some(c);
    }
    // A factory call on the failing line without `device=`.
    if let Some(fc) = line.calls.iter().find(|k| {
        let n = k.name();
        (k.callee.starts_with("torch.") || k.callee.starts_with("np."))
            && FACTORIES.contains(&n)
            && !k.kwargs.iter().any(|(k, _)| k == "device")
    }) {
        c.kind = "created-without-device".into();
        let text = format!("{}({})", fc.callee, fc.args.join(", "));
        c.summary = format!("`{text}` on the failing line creates a tensor on the default device ({stray}) while the rest of the computation is on {target}");
        c.expr = Some(text);
        c.confidence = Confidence::Likely;
        c.ctx.push(("culprit_role".into(), "a tensor created on the failing line".into()));
        return Some(c);
    }
    // The op-argument role table.
    let op_name = op.as_deref().or(role_op);
    let spec = op_name.and_then(|o| pack.op(o));
    let call = spec
        .and_then(|s| {
            line.calls.iter().find(|k| s.callees.iter().any(|n| k.callee.to_ascii_lowercase().contains(n.as_str())))
        })
        .or_else(|| line.calls.first());
    if let Some(spec) = spec {
        let argument_device = s("argument_device");
        // The misplaced tensor: the named argument when it is on the stray device,
        // else the first tensor argument (it set the "common" device). Without a
        // named argument, devices are listed in the op's argument order.
        let named = argument.as_deref().and_then(|a| spec.args.iter().find(|r| r.name == a));
        let role = if argument.is_some() {
            if argument_device.as_deref() == Some(stray.as_str()) {
                named
            } else {
                spec.args.first()
            }
        } else {
            devices.iter().position(|d| *d == stray).and_then(|i| spec.args.get(i))
        };
        if let Some(role) = role.filter(|_| !stray.is_empty()) {
            c.kind = role.kind.clone();
            c.ctx.push(("culprit_role".into(), role.role.clone()));
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
            if let Some(r) = &reference {
                c.ctx.push(("reference_expr".into(), r.clone()));
            }
            c.summary = match &expr {
                Some(e) if role.call_arg.is_some() => {
                    format!("`{e}` ({}) is still on {stray} while {} runs on {target}", role.role, spec.user_call)
                }
                Some(e) => format!(
                    "`{e}` has {} on {stray} while its input is on {target}: the module was not moved",
                    role.role
                ),
                None => format!("{} is on {stray} while the computation runs on {target}", role.role),
            };
            let settled = expr.is_some() && (named.is_some() || role_op.is_some()) && !code.is_empty();
            c.confidence = if settled { Confidence::Certain } else { Confidence::Likely };
            // Refinements from what the expression is.
            if let Some(e) = &expr {
                if role.call_arg.is_some() && e.starts_with("self.") && !e.contains('(') {
                    // A tensor kept in a plain attribute: `model.to()` does not move it.
                    c.kind = "unregistered-tensor-attribute".into();
                    c.summary = format!("`{e}` is a tensor stored as a plain attribute, still on {stray}: `model.to()` moves parameters and registered buffers only");
                    c.confidence = Confidence::Likely;
                } else if role.call_arg.is_none()
                    && (e.contains('[') || (in_forward && !e.starts_with("self.") && !e.contains('.')))
                {
                    // A submodule reached through a Python list (or a loop over one).
                    c.kind = "submodule-not-registered".into();
                    c.summary = format!("`{e}` is a submodule on {stray} while its input is on {target}: modules kept in a plain Python list or dict are not registered, so `model.to()` skips them");
                    c.confidence = Confidence::Likely;
                }
            }
            if expr.is_none() {
                c.missing.push(format!("Which expression on the failing line is {}", role.role));
                c.next_action = audit.clone();
            }
            c.expr = expr;
            return Some(c);
        }
    }
    // No argument named (TensorIterator wording): the failing line is the only guide.
    if let Some(k) = call {
        let lower = k.callee.to_ascii_lowercase();
        if ["loss", "criterion", "cross_entropy", "nll", "mse", "bce"].iter().any(|n| lower.contains(n))
            && k.args.len() >= 2
        {
            c.kind = "label-not-moved".into();
            let e = pycall::base_name(&k.args[1]).to_string();
            c.summary = format!("the loss mixes {target} and {stray}; the usual suspect is the target `{e}`, which the data loader returns on the CPU");
            c.ctx.push(("reference_expr".into(), pycall::base_name(&k.args[0]).to_string()));
            c.expr = Some(e);
            c.confidence = Confidence::Possible;
            c.missing.push("The device of each loss input (the message names no argument)".into());
            c.next_action = audit.clone();
            return Some(c);
        }
    }
    if target.is_empty() {
        return None;
    }
    // A tensor attribute used as an operand inside `forward` (`x * self.mask`).
    if let Some(attr) = plain_self_attribute(&code) {
        if in_forward {
            c.kind = "unregistered-tensor-attribute".into();
            c.summary = format!("`{attr}` is used as a tensor in `forward`; if it was assigned as a plain attribute (not `register_buffer`), `model.to()` left it on {stray} while the input is on {target}");
            c.expr = Some(attr);
            c.confidence = Confidence::Possible;
            c.missing.push("Whether that attribute is a registered buffer or parameter".into());
            c.next_action = audit.clone();
            return Some(c);
        }
    }
    c.summary = format!(
        "two operands of one operation are on {target} and {stray}; the message does not say which is misplaced"
    );
    c.missing.push("The device of each operand on the failing line".into());
    c.next_action = audit
        .or(Some("Rerun with the failing line's operands printed: `print(t.device)` for each tensor it uses.".into()));
    Some(c)
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
fn audit_snippet(line: &pycall::Line) -> Option<String> {
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
pub(super) fn device_literal(arg: &str) -> Option<String> {
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
