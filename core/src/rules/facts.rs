//! The keys rule text and conditions can name beyond a rule's own captures: the
//! contract's evidence, what the engine derives, and the facts a rule opts into.
//!
//! One table ([`KEYS`]), read by `rules check` (a placeholder or a condition naming a
//! key nothing provides is an error), by `torchdx explain --facts` and by the generated
//! docs. Facts are computed in `infer` only for rules that declare their group
//! (`facts = ["device-placement"]`); a test checks that every key infer computes is
//! listed here, so the table cannot drift from the code.

/// What a key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A string.
    Text,
    /// A list of strings (or of numbers, for a shape).
    List,
    /// A number.
    Number,
    /// Present (`true`) when the fact holds, absent otherwise: test it with
    /// `present = [...]` / `absent = [...]`.
    Flag,
}

impl Shape {
    /// How the docs name it.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Text => "text",
            Shape::List => "list",
            Shape::Number => "number",
            Shape::Flag => "flag",
        }
    }
}

/// Who provides a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    /// Evidence the report contract reserves, for every rule.
    Contract,
    /// Evidence or text values the engine adds for every rule.
    Engine,
    /// A fact of the named group, for rules that declare it in `facts`.
    Group(&'static str),
    /// A text value a `[[culprit_case]]` sets (`set = { ... }`), or the culprit itself.
    Decision,
    /// The row of `data/codes.toml` a rule's `lookup` found, for rules with a `lookup`.
    Lookup,
}

/// One key.
#[derive(Clone, Copy, Debug)]
pub struct Key {
    /// The name placeholders and conditions use.
    pub name: &'static str,
    /// What it holds.
    pub shape: Shape,
    /// Who provides it.
    pub provider: Provider,
    /// What it means.
    pub meaning: &'static str,
}

const fn key(name: &'static str, shape: Shape, provider: Provider, meaning: &'static str) -> Key {
    Key { name, shape, provider, meaning }
}

use Provider::{Contract, Decision, Engine, Group, Lookup};
use Shape::{Flag, List, Number, Text};

/// The fact group of device placement: which tensor or module is on the wrong device.
pub const DEVICE_PLACEMENT: &str = "device-placement";

/// Every key, in the order the docs list them.
pub const KEYS: &[Key] = &[
    key("exception", Text, Contract, "the exception class as printed, without its module"),
    key("message", Text, Contract, "the exception message, on one line"),
    key("devices", List, Contract, "devices in the order the message names them"),
    key("argument", Text, Contract, "the argument the message names"),
    key("op", Text, Contract, "the ATen operator, without wrapper, dispatch key or overload"),
    key("kernel", Text, Contract, "the kernel as printed (`wrapper_CUDA_nll_loss_forward`)"),
    key("failing_frame", Text, Contract, "`basename:line` of the last frame in the user's own code"),
    key("failing_code", Text, Contract, "the source line of that frame"),
    key("dispatch_key", Text, Engine, "the dispatch key of a captured `kernel` (`CUDA`)"),
    key("dtypes", List, Engine, "dtypes of the tensor types a `tensortype` capture read"),
    key("argument_device", Text, Engine, "the device of the named argument"),
    key("common_device", Text, Engine, "the device the other tensors are on"),
    key("torch_versions", Text, Engine, "the releases that print the matched wording"),
    key("rank", Number, Engine, "the rank the finding came from"),
    key("ranks", List, Engine, "every rank that reported the same failure"),
    key("fragmentation", Text, Engine, "`high` or `low`: reserved-but-unallocated CUDA memory against the card"),
    key("reserved_unallocated", Text, Engine, "reserved-but-unallocated CUDA memory, as the allocator prints sizes"),
    key("reserved_unallocated_bytes", Number, Engine, "the same, in bytes"),
    key("suspect_rank", Number, Engine, "the rank a cascade of echoes points at"),
    key("suspect_progress", Number, Engine, "when a lagging count named the suspect: its count (a rule's `progress`, `last enqueued NCCL work`)"),
    key("suspect_progress_others", Number, Engine, "the lowest count of every other rank"),
    key("suspect_line", Number, Engine, "the line of the suspect's own report"),
    key("origin_message", Text, Engine, "the message of an exception a rank caught before the echoes began"),
    key("final_exception", Text, Engine, "in a chain, the last exception (what ended the program)"),
    key("final_message", Text, Engine, "its message"),
    key("code_target", Text, Engine, "what the failing line assigns to (`loss`)"),
    key("code_callee", Text, Engine, "the failing line's outermost call (`criterion`)"),
    key("code_arg0", Text, Engine, "the name of that call's first positional argument"),
    key("code_arg1", Text, Engine, "the name of its second positional argument"),
    key("code_arg2", Text, Engine, "the name of its third positional argument"),
    key("culprit_kind", Text, Decision, "the culprit's kind"),
    key("culprit_expr", Text, Decision, "the expression at fault"),
    key("culprit_summary", Text, Decision, "the culprit's one-sentence summary"),
    key("culprit_role", Text, Decision, "what the misplaced tensor is to the user (`the labels`)"),
    key("reference_expr", Text, Decision, "an expression on the right device to move the culprit to"),
    key("target_device", Text, Group(DEVICE_PLACEMENT), "the device the computation runs on (an accelerator over the CPU, a real device over meta)"),
    key("stray_device", Text, Group(DEVICE_PLACEMENT), "the other device, where the misplaced tensor is"),
    key("device_pair", Text, Group(DEVICE_PLACEMENT), "`meta` (a device is meta), `two-accelerators` (two different accelerators), `accel-vs-host` or `same`"),
    key("loads_checkpoint", Flag, Group(DEVICE_PLACEMENT), "a frame is in `torch/serialization.py`, or the failing line calls `torch.load(` without `map_location`"),
    key("in_dataparallel", Flag, Group(DEVICE_PLACEMENT), "a frame is in `nn.DataParallel` (`data_parallel`, `replicate`, `parallel_apply`)"),
    key("distributed", Flag, Group(DEVICE_PLACEMENT), "the run is multi-process: ranks in the log, `LOCAL_RANK`, `local_rank` or `init_process_group` anywhere, or frames in `torch/distributed`"),
    key("frames_all_library", Flag, Engine, "every frame shown is library code: under `site-packages` / `dist-packages`, in torch, or a package-relative path whose first directory is a library listed in `data/ops.toml` (`diffusers/models/embeddings.py`)"),
    key("library", Text, Engine, "the installed package of the innermost library frame that is not torch itself (`diffusers`), else `torch`"),
    key("in_optimizer_step", Flag, Group(DEVICE_PLACEMENT), "the innermost frame is in `torch/optim/`"),
    key("in_hf_device_map", Flag, Group(DEVICE_PLACEMENT), "a frame is in accelerate's device-map hooks (`accelerate/hooks`, `accelerate/big_modeling`)"),
    key("log_loads_state_dict", Flag, Group(DEVICE_PLACEMENT), "the log shows `load_state_dict` anywhere"),
    key("factory_call", Text, Group(DEVICE_PLACEMENT), "a tensor factory called on the failing line without `device=` (`torch.zeros(3, 4)`; the factories are listed in `data/ops.toml`)"),
    key("factory_call_on_device", Text, Group(DEVICE_PLACEMENT), "that factory call with `device=x.device` added (`torch.zeros(3, 4, device=x.device)`), `x` standing for a tensor already on the right device"),
    key("self_attribute", Text, Group(DEVICE_PLACEMENT), "the first `self.name` the failing line uses as a value, not called (`self.mask`)"),
    key("in_forward", Flag, Group(DEVICE_PLACEMENT), "the failing user frame is a module's `forward`"),
    key("audit", Text, Group(DEVICE_PLACEMENT), "a ready-to-paste Python loop printing the device of each name on the failing line"),
    key("role_kind", Text, Group(DEVICE_PLACEMENT), "from the op-argument role table (`data/ops.toml`): the culprit kind of the misplaced argument"),
    key("role", Text, Group(DEVICE_PLACEMENT), "what the misplaced argument is to the user (`the labels`)"),
    key("role_in_call", Flag, Group(DEVICE_PLACEMENT), "the misplaced argument is a positional argument of the call on the failing line (not a parameter of the module)"),
    key("role_expr", Text, Group(DEVICE_PLACEMENT), "the expression on the failing line bound to it: the call's argument, or the module called"),
    key("role_other_calls", Text, Group(DEVICE_PLACEMENT), "when several calls on the failing line could run the op, the others than `role_expr`'s (joined with `` `, ` ``): the culprit is then likely, not certain"),
    key("role_expr_self_attr", Flag, Group(DEVICE_PLACEMENT), "the misplaced argument is a plain `self.` attribute on the failing line (`self.mask`), not a called module"),
    key("role_expr_subscript", Flag, Group(DEVICE_PLACEMENT), "that expression is subscripted (`self.blocks[i]`)"),
    key("role_expr_local", Flag, Group(DEVICE_PLACEMENT), "that expression is a bare local name (`layer`)"),
    key("role_reference_expr", Text, Group(DEVICE_PLACEMENT), "another argument of the same call, on the right device"),
    key("role_settled", Flag, Group(DEVICE_PLACEMENT), "the message names the argument (or the template names the op) and the failing line is shown: the role is certain"),
    key("op_user_call", Text, Group(DEVICE_PLACEMENT), "what the user called for that op (`the loss (nn.CrossEntropyLoss / F.cross_entropy / F.nll_loss)`)"),
    key("loss_target_expr", Text, Group(DEVICE_PLACEMENT), "when no argument is known: the second argument of a loss call on the failing line (`labels`)"),
    key("loss_input_expr", Text, Group(DEVICE_PLACEMENT), "and its first argument (`outputs`)"),
    key("code", Text, Lookup, "the code's enum name (`cudaErrorIllegalAddress`, `CUBLAS_STATUS_NOT_SUPPORTED`, `ncclSystemError`), or the pattern of an explaining NCCL line"),
    key("code_table", Text, Lookup, "its table (`cuda`, `cuda-legacy`, `cublas`, `cudnn`, `nccl`, `nccl-line`, `signal`, ...)"),
    key("code_number", Number, Lookup, "its number in that table"),
    key("code_meaning", Text, Lookup, "what the code means"),
    key("code_causes", List, Lookup, "its usual causes"),
    key("code_check", Text, Lookup, "the first thing to check"),
    key("code_family", Text, Lookup, "the family the code usually means"),
];

/// The fact groups a rule may declare.
pub const GROUPS: &[&str] = &[DEVICE_PLACEMENT];

/// The key of this name.
pub fn get(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == name)
}

/// Whether a rule declaring `groups` (and a `lookup`, if `lookup`) may name `name` in
/// its text and conditions.
pub fn provided(name: &str, groups: &[String], lookup: bool) -> bool {
    get(name).is_some_and(|k| match k.provider {
        Group(g) => groups.iter().any(|x| x == g),
        Lookup => lookup,
        _ => true,
    })
}
