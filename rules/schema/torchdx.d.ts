// Generated from rules/schema/*.schema.json by `torchdx rules schema`; do not edit.

/**
 * What torchdx made of one log.
 */
export interface Report {
  /**
   * The findings: the initiating one first, then in order of appearance.
   */
  findings: Finding[];
  /**
   * Index into `findings` of the failure that started the collapse; `None` when the
   * log holds no failure.
   */
  initiating: number | null;
  /**
   * Facts about the input as a whole.
   */
  input: Input;
  /**
   * `torchdx/report@1`.
   */
  schema: Schema;
  /**
   * A short ordered account of what failed first and how others followed.
   */
  timeline?: TimelineEntry[];
}

/**
 * How sure a finding is.
 */
export type Confidence = "certain" | "likely" | "possible";

/**
 * The tensor or setting at fault.
 */
export interface Culprit {
  /**
   * The expression at fault in the user's code, when known.
   */
  expr: string | null;
  /**
   * Kebab-case kind (the contract's vocabulary, or a rule's own).
   */
  kind: string;
  /**
   * One sentence on what is wrong, bound to this log.
   */
  summary: string;
}

/**
 * Only facts the log shows; the reserved keys below have fixed meanings, rules add their own captures.
 */
export interface Evidence {
  /**
   * The argument the message names.
   */
  argument?: string;
  /**
   * Devices in the order the message names them.
   */
  devices?: string[];
  /**
   * The exception class as printed, without its module.
   */
  exception?: string;
  /**
   * The source line of that frame.
   */
  failing_code?: string;
  /**
   * basename:line of the last frame in the user's own code.
   */
  failing_frame?: string;
  /**
   * The kernel as printed.
   */
  kernel?: string;
  /**
   * The exception message, on one line.
   */
  message?: string;
  /**
   * The ATen operator, without wrapper, dispatch key or overload.
   */
  op?: string;
  [key: string]: unknown;
}

/**
 * One diagnosed failure.
 */
export interface Finding {
  /**
   * How to confirm, each step checkable.
   */
  checklist: string[];
  /**
   * For a collateral finding: the index of the finding that caused it.
   */
  collateral_of: number | null;
  /**
   * How sure it is.
   */
  confidence: Confidence;
  /**
   * The tensor or setting at fault; `None` when the log cannot tell.
   */
  culprit: Culprit | null;
  /**
   * Only facts the log shows.
   */
  evidence: Evidence;
  /**
   * The family id from the taxonomy.
   */
  family: string;
  /**
   * The fix (Markdown; may hold a code block).
   */
  fix: string;
  /**
   * The rule id (stable, kebab-case).
   */
  id: string;
  /**
   * The input lines it covers.
   */
  location: Location;
  /**
   * Why it happens.
   */
  mechanism: string;
  /**
   * Facts absent from the log that would settle it.
   */
  missing: string[];
  /**
   * The single most useful next step.
   */
  next_action: string;
  /**
   * The structural change that stops it coming back.
   */
  prevent: string;
  /**
   * The global rank it came from; `None` when the log does not tell.
   */
  rank: number | null;
  /**
   * Every rank that reported this same failure (added field).
   */
  ranks?: number[];
  /**
   * Ids of related rules.
   */
  related: string[];
  /**
   * Its part in the collapse.
   */
  role: Role;
  /**
   * The headline.
   */
  title: string;
  /**
   * How to show the fix worked.
   */
  verify: string;
}

/**
 * Facts about the input as a whole.
 */
export interface Input {
  /**
   * Bytes read.
   */
  bytes: number;
  /**
   * Lines of kept context dropped to stay within the memory bound (added field): the
   * middle of a very long, failure-dense log. The earliest and the latest failures
   * are kept; a failure whose lines were dropped is missing from the report.
   */
  dropped_lines?: number;
  /**
   * Lines read.
   */
  lines: number;
  /**
   * Ranks seen, ascending.
   */
  ranks: number[];
  /**
   * Lines longer than 64 KiB whose middle was dropped (added field).
   */
  truncated_lines?: number;
}

/**
 * 1-based input lines a finding covers.
 */
export interface Location {
  /**
   * Last line.
   */
  end_line: number;
  /**
   * First line.
   */
  line: number;
}

/**
 * A finding's part in the collapse.
 */
export type Role = "initiating" | "collateral" | "independent";

export type Schema = "torchdx/report@1";

/**
 * One line of the timeline.
 */
export interface TimelineEntry {
  /**
   * Index of the finding.
   */
  finding: number;
  /**
   * Ranks involved (empty for the launcher).
   */
  ranks: number[];
  /**
   * `who: what (rule id)`.
   */
  text: string;
  /**
   * `HH:MM:SS` when the log carries a timestamp.
   */
  time: string | null;
}

/**
 * A rule file as written.
 */
export interface RuleSpec {
  /**
   * Text bound to evidence.
   */
  case?: CaseSpec[];
  /**
   * How to confirm, each step checkable.
   */
  checklist: string[];
  /**
   * This message is normally the echo of a failure elsewhere.
   */
  collateral?: boolean;
  /**
   * Default confidence of a finding.
   */
  confidence?: Confidence;
  /**
   * A culprit the rule always names.
   */
  culprit: CulpritSpec | null;
  /**
   * Culprit decisions (rules with `facts`).
   */
  culprit_case?: CulpritCase[];
  /**
   * Examples, run as tests.
   */
  example?: Example[];
  /**
   * Groups of facts the engine computes for this rule's conditions and text
   * (`torchdx explain --facts` lists them).
   */
  facts?: string[];
  /**
   * The rule for exceptions no other rule recognises: it has no templates, and the
   * engine applies it to every traceback chain no template matched.
   */
  fallback?: boolean;
  /**
   * A family id from `data/families.toml`.
   */
  family: string;
  /**
   * The fix (Markdown).
   */
  fix: string;
  /**
   * Kebab-case id, equal to the file stem.
   */
  id: string;
  /**
   * This message is the launcher's summary of failed workers (torchrun's
   * `ChildFailedError`): it names ranks, and a worker's own report is its cause.
   */
  launcher_summary?: boolean;
  /**
   * Read a captured error code through the code tables of `data/codes.toml`.
   */
  lookup: LookupSpec | null;
  /**
   * Message templates.
   */
  match?: MatchSpec[];
  /**
   * Why it happens.
   */
  mechanism: string;
  /**
   * Facts absent from the log that would settle it.
   */
  missing?: string[];
  /**
   * The single most useful next step.
   */
  next_action: string;
  /**
   * The structural change that stops it coming back.
   */
  prevent: string;
  /**
   * When templates of two rules match overlapping text, the higher priority wins.
   */
  priority?: number;
  /**
   * An `int` capture of this rule's templates that counts how far the rank printing
   * the message got (`last enqueued NCCL work: 41`). When every report in a log is an
   * echo, the one rank whose count is below every other rank's is the suspect: it
   * never issued the collective the others wait in.
   */
  progress: string | null;
  /**
   * Ids of related rules.
   */
  related?: string[];
  /**
   * The mechanism in one line (the docs hub).
   */
  summary: string;
  /**
   * This message is printed while the job is torn down after a failure (the agent's
   * SIGTERMs to healthy workers, a process group's abort notice, a store's broken
   * pipe after its server died): it never initiates and is no cascade to follow.
   */
  teardown?: boolean;
  /**
   * Headline of a finding.
   */
  title: string;
  /**
   * How to show the fix worked.
   */
  verify: string;
}

/**
 * A `[[case]]`: text bound to what this log shows. The first case whose `when` holds
 * overrides the rule's fields that it sets.
 */
export interface CaseSpec {
  /**
   * Overrides the rule's checklist.
   */
  checklist: string[] | null;
  /**
   * Overrides the rule's `collateral` for this evidence (an OOM with a garbage size
   * is the echo of a hang, not a failure of its own).
   */
  collateral: boolean | null;
  /**
   * Overrides the rule's confidence.
   */
  confidence: Confidence | null;
  /**
   * Sets the culprit.
   */
  culprit: CulpritSpec | null;
  /**
   * Overrides the rule's fix.
   */
  fix: string | null;
  /**
   * Overrides the rule's mechanism.
   */
  mechanism: string | null;
  /**
   * Overrides the rule's missing facts.
   */
  missing: string[] | null;
  /**
   * Kebab-case name, unique in the rule: examples say which case they expect.
   */
  name: string;
  /**
   * Overrides the rule's next action.
   */
  next_action: string | null;
  /**
   * Overrides the rule's prevention.
   */
  prevent: string | null;
  /**
   * Overrides the rule's `teardown` for this evidence (a worker's SIGABRT is the NCCL
   * watchdog taking the process down when the log shows the watchdog's timeout: no
   * cascade to follow).
   */
  teardown: boolean | null;
  /**
   * Overrides the rule's title.
   */
  title: string | null;
  /**
   * Overrides the rule's verification.
   */
  verify: string | null;
  /**
   * When it applies.
   */
  when?: When;
}

/**
 * A `[[culprit_case]]`: one named, ordered culprit decision of a rule that declares
 * `facts`. The first whose `when` holds (on the evidence and the facts) names the
 * culprit; its `missing` and `next_action` replace the rule's.
 */
export interface CulpritCase {
  /**
   * How sure the decision is.
   */
  confidence: Confidence;
  /**
   * The expression at fault; left out when a placeholder has no value.
   */
  expr: string | null;
  /**
   * Culprit kind; may be a placeholder (`{role_kind}`) that renders to one.
   */
  kind: string;
  /**
   * What the log does not show that would settle it (replaces the rule's list).
   */
  missing: string[] | null;
  /**
   * Kebab-case name, unique in the rule.
   */
  name: string;
  /**
   * The next step (replaces the rule's when every placeholder has a value).
   */
  next_action: string | null;
  /**
   * Values this decision gives the rule's text (`culprit_role = "{role}"`), each
   * set only when its placeholders have values.
   */
  set?: { [key: string]: string };
  /**
   * One sentence on what is wrong.
   */
  summary: string;
  /**
   * When it decides.
   */
  when?: When;
}

/**
 * A culprit declared by a rule or case (text with placeholders).
 */
export interface CulpritSpec {
  /**
   * The expression at fault, with placeholders; left out when a placeholder has no value.
   */
  expr: string | null;
  /**
   * Culprit kind (kebab-case; the contract's vocabulary or the rule's own).
   */
  kind: string;
  /**
   * One sentence on what is wrong, with placeholders.
   */
  summary: string;
}

/**
 * An inline example: a log and what the rule must make of it.
 */
export interface Example {
  /**
   * The `[[case]]` (or `[[culprit_case]]`) the finding must come from.
   */
  case: string | null;
  /**
   * The culprit kind the finding must name.
   */
  culprit_kind: string | null;
  /**
   * Facts the report's primary finding must carry.
   */
  evidence?: { [key: string]: unknown };
  /**
   * Whether the rule must diagnose it.
   */
  expect: Expect;
  /**
   * The log.
   */
  log: string;
  /**
   * Kebab-case name, unique in the rule.
   */
  name: string;
  /**
   * Where the wording comes from (a torch version, a launcher, a thread).
   */
  source: string | null;
  /**
   * A known miss: the example states what should happen, the engine does not do it
   * yet, and `rules check` reports it as a known miss instead of a failure.
   */
  todo?: boolean;
}

/**
 * What an example expects.
 */
export type Expect = "match" | "no-match";

/**
 * `lookup = { tables = [...], keys = [...] }`: the first of `keys` (evidence keys) whose
 * value names a row of one of `tables` (by the code's name, its number, the message
 * its library prints, or, for `[[line]]` tables, a pattern the value contains) adds the
 * row to the evidence: `code`, `code_table`, `code_number`, `code_meaning`,
 * `code_causes`, `code_check`, `code_family`; rule text uses them as placeholders.
 */
export interface LookupSpec {
  /**
   * The row's family becomes the finding's: one generic rule then gives every code
   * its own family.
   */
  family?: boolean;
  /**
   * Evidence keys to read, in order.
   */
  keys: string[];
  /**
   * Table names (`cuda`, `cuda-legacy`, `cublas`, `cudnn`, `nccl`, `nccl-line`, `signal`, ...).
   */
  tables: string[];
}

/**
 * One `[[match]]` entry: a message template.
 */
export interface MatchSpec {
  /**
   * Only when raised as one of these exception classes (module path ignored).
   */
  exception?: string[];
  /**
   * The op whose argument roles apply when the message names none
   * (`Input type (...) and weight type (...)` is a convolution).
   */
  role_op: string | null;
  /**
   * Evidence this wording implies, as constants (`set = { nccl_code =
   * "ncclSystemError" }`): what a fixed text says without a capture to hold it.
   */
  set?: { [key: string]: string };
  /**
   * The message as PyTorch prints it, variable parts replaced by typed captures.
   */
  template: string;
  /**
   * The torch releases that print this wording, e.g. `">=2.8"`, `"1.10-2.7"`.
   */
  torch: string | null;
  /**
   * Conditions on this match's own captures (`differ = ["devices"]`): the template
   * only counts when they hold. Frame and log conditions are not available here.
   */
  when: When | null;
  /**
   * Only a match in full counts, never one cut short by the end of a paste: for a
   * template whose head is structure every traceback prints (`Traceback (most recent
   * call last):` then a frame), which a cut paste would otherwise match.
   */
  whole?: boolean;
}

/**
 * A string or a list of strings.
 */
export type OneOrMany = string | string[];

/**
 * Conditions; all that are given must hold.
 */
export interface When {
  /**
   * No key has a value.
   */
  absent?: string[];
  /**
   * At least one of these conditions holds (besides all the others above).
   */
  any?: When[];
  /**
   * The value contains the text.
   */
  contains?: { [key: string]: string };
  /**
   * The list holds at least two distinct values.
   */
  differ?: string[];
  /**
   * The value equals (a list: equals one of them).
   */
  equals?: { [key: string]: OneOrMany };
  /**
   * The number under the key is greater than the number under the other key
   * (`exceeds = { workers_joined = "world_size" }`); false when either is not a number.
   */
  exceeds?: { [key: string]: string };
  /**
   * The exception class is one of these.
   */
  exception?: string[];
  /**
   * Some traceback frame's path or function contains one of these.
   */
  frame_contains?: string[];
  /**
   * The log contains one of these texts anywhere.
   */
  log_contains?: string[];
  /**
   * Each key has a value.
   */
  present?: string[];
}
