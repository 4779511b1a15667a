//! Seeded, platform-independent randomness and hashing: the one generator and the one stable
//! hash behind every simulation, synthetic data set, shuffled visiting order and per-case
//! draw of the workspace, so the same seed gives the same run on every machine and release.
//!
//! [`SeededRng`] is SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
//! generators", OOPSLA 2014): 64 bits of state, a full period of 2^64, and a good spread from
//! adjacent seeds. It is not cryptographic.

/// The golden-ratio increment of SplitMix64 (also a good multiplier to spread a seed).
pub const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// The SplitMix64 finaliser: a bijective mix of 64 bits in which every input bit affects
/// every output bit. `mix64(a ^ b)` derives one well-spread value from two keys.
pub fn mix64(z: u64) -> u64 {
    let z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// FNV-1a, 64 bit, of `bytes`: a stable hash (the same on every platform and release, unlike
/// `std`'s `DefaultHasher`), for keys that must not change between runs.
pub fn stable_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A small, fast, seeded generator (SplitMix64): the same seed gives the same sequence
/// everywhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeededRng(u64);

impl SeededRng {
    /// A generator from a seed (every seed, 0 included, is a good one).
    pub fn new(seed: u64) -> Self {
        SeededRng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN_GAMMA);
        mix64(self.0)
    }

    /// A uniform integer below `n` (0 when `n` is 0; one draw either way). The modulo bias is
    /// below `n / 2^64`, negligible for the small ranges it serves.
    pub fn below(&mut self, n: usize) -> usize {
        // usize is at most 64 bits on every supported target, so neither cast truncates.
        (self.next_u64() % (n.max(1) as u64)) as usize
    }

    /// `true` with probability `p` (never for `p <= 0`, always for `p >= 1`).
    pub fn chance(&mut self, p: f64) -> bool {
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    /// Shuffles `items` in place (Fisher-Yates), every order equally likely up to the modulo
    /// bias of [`below`](Self::below).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequence_is_splitmix64() {
        // The first outputs of SplitMix64 from seed 0 (the reference C implementation).
        let mut rng = SeededRng::new(0);
        assert_eq!(rng.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(rng.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(rng.next_u64(), 0x06c4_5d18_8009_454f);
    }

    #[test]
    fn the_same_seed_gives_the_same_draws() {
        let draw = |seed| {
            let mut rng = SeededRng::new(seed);
            (0..32).map(|_| rng.below(1000)).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
    }

    #[test]
    fn below_stays_in_range_and_zero_is_allowed() {
        let mut rng = SeededRng::new(42);
        for n in [1usize, 2, 3, 10, 1 << 40] {
            for _ in 0..200 {
                assert!(rng.below(n) < n);
            }
        }
        let before = rng.clone();
        assert_eq!(rng.below(0), 0);
        assert_ne!(
            rng, before,
            "below(0) still draws, so sequences do not depend on n"
        );
    }

    #[test]
    fn chance_follows_its_probability() {
        let mut rng = SeededRng::new(1);
        assert!((0..1000).all(|_| !rng.chance(0.0)));
        assert!((0..1000).all(|_| rng.chance(1.0)));
        let hits = (0..20_000).filter(|_| rng.chance(0.25)).count();
        assert!(
            (4_500..5_500).contains(&hits),
            "{hits} hits of 20000 at p = 0.25"
        );
    }

    #[test]
    fn shuffle_permutes() {
        let mut rng = SeededRng::new(3);
        let mut items: Vec<u32> = (0..50).collect();
        rng.shuffle(&mut items);
        assert_ne!(items, (0..50).collect::<Vec<_>>());
        items.sort_unstable();
        assert_eq!(items, (0..50).collect::<Vec<_>>());
        let mut empty: [u8; 0] = [];
        rng.shuffle(&mut empty);
    }

    #[test]
    fn stable_hash_is_fnv1a() {
        // Published FNV-1a 64 test vectors.
        assert_eq!(stable_hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(stable_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(stable_hash(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn mix64_spreads_adjacent_keys() {
        let a = mix64(1);
        let b = mix64(2);
        assert!((a ^ b).count_ones() > 16, "{a:x} vs {b:x}");
        assert_eq!(mix64(0), 0);
    }
}
