//! A hash for small integer keys: the matcher's records of what it tried, looked up
//! at every anchor hit and every branching piece (thousands of times along one long
//! line). The multiply-rotate hash rustc uses (FxHash) instead of SipHash: the keys
//! are positions and rule indices, and the ordered maps this replaced were a fifth
//! of the time on near misses repeated along 64 KiB lines.

use std::hash::{BuildHasherDefault, Hasher};

/// `HashMap`/`HashSet` builder of [`IntHasher`].
pub(crate) type Ints = BuildHasherDefault<IntHasher>;

#[derive(Default)]
pub(crate) struct IntHasher(u64);

impl Hasher for IntHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}
