//! The shape of the job a log comes from: how many nodes, which node this is, how many
//! processes per node, the world size, the hosts.
//!
//! A rank printed by a launcher is often a *local* rank (`failed (exitcode: 1)
//! local_rank: 3`, torchrun's `[default3]:` tee label, DeepSpeed's `--local_rank=3`).
//! It is the global rank only when the job ran on one node; deciding that, and deriving
//! the global rank on several (`group_rank * nproc_per_node + local_rank`), takes the
//! facts this grammar reads from launcher command lines and logs:
//!
//! ```text
//! torchrun --nnodes 2 --nproc-per-node 8 --node-rank 1 train.py
//! [default] Starting elastic_operator with launch configs: ... min_nodes: 2 max_nodes: 2 nproc_per_node: 8
//! deepspeed --num_nodes 1 --num_gpus 4 train.py
//! WORLD INFO DICT: {'localhost': [0, 1, 2, 3]}
//! NODE_RANK=1 WORLD_SIZE=16 LOCAL_WORLD_SIZE=8
//! ```

/// Literals that start the facts [`facts`] reads: the prefilter keeps their lines.
pub(crate) const TRIGGERS: &[&str] = &[
    "nnodes",
    "num_nodes",
    "min_nodes",
    "node_rank",
    "node-rank",
    "NODE_RANK",
    "group_rank",
    "GROUP_RANK",
    "nproc_per_node",
    "nproc-per-node",
    "num_gpus",
    "WORLD_SIZE",
    "world_size",
    "WORLD INFO DICT",
];

/// One fact about the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fact {
    /// Nodes in the job (`--nnodes 2`, `min_nodes: 2`, `--num_nodes 2`; an elastic
    /// range `1:4` gives its lower bound).
    Nodes(u32),
    /// This node's index (`--node-rank 1`, `NODE_RANK=1`, `group_rank=1`).
    NodeRank(u32),
    /// Processes per node (`--nproc-per-node 8`, `--num_gpus 8`).
    PerNode(u32),
    /// Processes in the job (`WORLD_SIZE=16`, `world_size=16`).
    World(u32),
    /// A host of the job (DeepSpeed's `WORLD INFO DICT`).
    Host(String),
}

/// The number after `key` and a separator (`=`, `:`, spaces), as in `--nnodes 2`,
/// `--nnodes=1:4`, `min_nodes: 2`, `'nnodes': 2`.
fn number_after(text: &str, key: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    for (p, _) in text.match_indices(key) {
        // A key glued to more name characters is another key (`LOCAL_WORLD_SIZE` is not
        // `WORLD_SIZE`).
        let before = p.checked_sub(1).map(|i| b[i]);
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_') {
            continue;
        }
        let rest = &text[p + key.len()..];
        let rest = rest.trim_start_matches(['\'', '"']);
        let sep = rest.len() - rest.trim_start_matches([' ', '=', ':', '\t']).len();
        if sep == 0 || sep > 16 {
            continue;
        }
        let digits: String = rest[sep..].chars().take_while(char::is_ascii_digit).take(7).collect();
        if let Ok(n) = digits.parse() {
            out.push(n);
        }
    }
    out
}

/// Makes the fact a key's number states (a `Fact` variant used as a function).
type ToFact = fn(u32) -> Fact;

/// The keys a number follows, and the fact it is.
const NUMBER_KEYS: &[(&str, ToFact)] = &[
    ("nnodes", Fact::Nodes),
    ("num_nodes", Fact::Nodes),
    ("min_nodes", Fact::Nodes),
    ("node_rank", Fact::NodeRank),
    ("node-rank", Fact::NodeRank),
    ("NODE_RANK", Fact::NodeRank),
    ("group_rank", Fact::NodeRank),
    ("GROUP_RANK", Fact::NodeRank),
    ("nproc_per_node", Fact::PerNode),
    ("nproc-per-node", Fact::PerNode),
    ("num_gpus", Fact::PerNode),
    ("LOCAL_WORLD_SIZE", Fact::PerNode),
    ("local_world_size", Fact::PerNode),
    ("WORLD_SIZE", Fact::World),
    ("world_size", Fact::World),
];

/// Every key [`facts`] reads contains one of these: most lines contain none, and are
/// passed over with these few searches instead of one per key (the keys' searches
/// were 8% of a 100 KB paste's diagnosis).
const KEY_PARTS: &[&str] = &["node", "NODE", "group", "GROUP", "gpus", "world", "WORLD"];

/// The facts a line states.
pub fn facts(text: &str) -> Vec<Fact> {
    let mut out = Vec::new();
    if !KEY_PARTS.iter().any(|k| memchr::memmem::find(text.as_bytes(), k.as_bytes()).is_some()) {
        return out;
    }
    for (key, fact) in NUMBER_KEYS {
        out.extend(number_after(text, key).into_iter().map(fact));
    }
    if let Some(p) = text.find("WORLD INFO DICT:") {
        // `{'node-a': [0, 1], 'node-b': [0, 1]}`: the quoted keys are the hosts.
        let dict = &text[p..];
        let mut parts = dict.split('\'');
        parts.next();
        while let (Some(host), Some(after)) = (parts.next(), parts.next()) {
            if after.trim_start().starts_with(':') && !host.is_empty() && !host.contains(' ') {
                out.push(Fact::Host(host.to_string()));
            }
        }
    }
    out
}

/// What a log says of its job.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topology {
    /// Nodes, the largest any line states.
    pub nodes: Option<u32>,
    /// Node indices stated.
    pub node_ranks: Vec<u32>,
    /// Processes per node.
    pub per_node: Option<u32>,
    /// Processes in the job.
    pub world: Option<u32>,
    /// Hosts named.
    pub hosts: Vec<String>,
    /// Some rank was printed with a different local rank (`rank : 13 (local_rank: 5)`).
    pub rank_differs_from_local: bool,
}

impl Topology {
    /// Adds a line's facts.
    pub fn add(&mut self, f: Fact) {
        match f {
            Fact::Nodes(n) => self.nodes = Some(self.nodes.map_or(n, |m| m.max(n))),
            Fact::NodeRank(n) => {
                if !self.node_ranks.contains(&n) {
                    self.node_ranks.push(n);
                }
            }
            Fact::PerNode(n) => self.per_node = Some(self.per_node.map_or(n, |m| m.max(n))),
            Fact::World(n) => self.world = Some(self.world.map_or(n, |m| m.max(n))),
            Fact::Host(h) => self.add_host(&h),
        }
    }

    /// Adds a host the log names (a summary's `host :`, a `[host:N]:` label).
    pub fn add_host(&mut self, h: &str) {
        let h = h.trim();
        if !h.is_empty() && !self.hosts.iter().any(|x| x == h) {
            self.hosts.push(h.to_string());
        }
    }

    /// Whether the log shows several nodes: more than one host, a node count above one,
    /// a node index above zero, a world larger than a node, a rank unlike its local rank.
    pub fn multi_node(&self) -> bool {
        self.hosts.len() > 1
            || self.nodes.is_some_and(|n| n > 1)
            || self.node_ranks.iter().any(|&r| r > 0)
            || matches!((self.world, self.per_node), (Some(w), Some(p)) if w > p)
            || self.rank_differs_from_local
    }

    /// The global rank of local rank `local` where the log gives what it takes: the
    /// local rank itself on one node; on several, this node's index times the processes
    /// per node plus the local rank, when exactly one node index is stated.
    pub fn global(&self, local: u32) -> Option<(u32, &'static str)> {
        if !self.multi_node() {
            return Some((local, "one-node"));
        }
        match (self.node_ranks.as_slice(), self.per_node) {
            ([node], Some(per)) => Some((node.checked_mul(per)?.checked_add(local)?, "node-rank")),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key none of `KEY_PARTS` is part of would never be read.
    #[test]
    fn every_key_contains_a_key_part() {
        let keys = NUMBER_KEYS.iter().map(|(k, _)| *k).chain(["WORLD INFO DICT:"]).chain(TRIGGERS.iter().copied());
        for key in keys {
            assert!(KEY_PARTS.iter().any(|p| key.contains(p)), "{key} contains no key part");
        }
    }

    #[test]
    fn facts_of_launcher_lines() {
        let table: &[(&str, &[Fact])] = &[
            (
                "torchrun --nnodes 2 --nproc-per-node 8 --node-rank 1 train.py",
                &[Fact::Nodes(2), Fact::NodeRank(1), Fact::PerNode(8)],
            ),
            ("torchrun --nnodes=1:4 --nproc_per_node=4 x.py", &[Fact::Nodes(1), Fact::PerNode(4)]),
            ("  min_nodes        : 2\n", &[Fact::Nodes(2)]),
            ("NODE_RANK=1 WORLD_SIZE=16 LOCAL_WORLD_SIZE=8", &[Fact::NodeRank(1), Fact::PerNode(8), Fact::World(16)]),
            ("deepspeed --num_nodes 1 --num_gpus 3 finetune.py", &[Fact::Nodes(1), Fact::PerNode(3)]),
            (
                "WORLD INFO DICT: {'node-a': [0, 1], 'node-b': [0, 1]}",
                &[Fact::Host("node-a".into()), Fact::Host("node-b".into())],
            ),
            ("rank 2 loss 0.3 max_nnodes 4", &[]),
        ];
        for (text, want) in table {
            assert_eq!(facts(text), want.to_vec(), "{text}");
        }
    }

    #[test]
    fn local_to_global() {
        let mut one = Topology::default();
        assert_eq!(one.global(3), Some((3, "one-node")));
        one.add(Fact::Nodes(1));
        one.add_host("gpu-node-02");
        assert!(!one.multi_node());
        let mut two = Topology::default();
        two.add(Fact::Nodes(2));
        assert_eq!(two.global(5), None);
        two.add(Fact::NodeRank(1));
        two.add(Fact::PerNode(8));
        assert_eq!(two.global(5), Some((13, "node-rank")));
        let mut hosts = Topology::default();
        hosts.add_host("a");
        hosts.add_host("b");
        assert!(hosts.multi_node());
        let differs = Topology { rank_differs_from_local: true, ..Topology::default() };
        assert_eq!(differs.global(5), None);
    }
}
