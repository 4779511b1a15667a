//! [`Name`]: a string many records repeat (a component, an operation, a trace id), held once
//! however many records carry it; and [`NameInterner`], which makes equal names share.
//!
//! A million spans of twenty services hold twenty component names, not a million: a source
//! that reads records interns their names as it goes, and a clone of a [`Name`] is a pointer
//! copy. A `Name` reads as a `&str` (it dereferences to one), compares, orders and hashes as
//! its text, and (de)serializes as a plain string.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An immutable string whose clones share one allocation.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Name(Arc<str>);

impl Name {
    /// A name holding `text` (its own allocation; see [`NameInterner`] to share).
    pub fn new(text: &str) -> Self {
        Name(Arc::from(text))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether two names share one allocation (what interning achieves).
    pub fn shares_with(&self, other: &Name) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Deref for Name {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl From<&str> for Name {
    fn from(text: &str) -> Self {
        Name::new(text)
    }
}

impl From<String> for Name {
    fn from(text: String) -> Self {
        Name(Arc::from(text))
    }
}

impl From<&String> for Name {
    fn from(text: &String) -> Self {
        Name::new(text)
    }
}

impl From<&Name> for Name {
    fn from(name: &Name) -> Self {
        name.clone()
    }
}

impl From<Name> for String {
    fn from(name: Name) -> Self {
        name.0.to_string()
    }
}

impl From<&Name> for String {
    fn from(name: &Name) -> Self {
        name.0.to_string()
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for Name {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<Name> for str {
    fn eq(&self, other: &Name) -> bool {
        self == &*other.0
    }
}

impl PartialEq<Name> for &str {
    fn eq(&self, other: &Name) -> bool {
        *self == &*other.0
    }
}

impl PartialEq<Name> for String {
    fn eq(&self, other: &Name) -> bool {
        **self == *other.0
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Name::from)
    }
}

/// Hands out one shared [`Name`] per distinct text: what a source uses while it reads, so
/// that every record naming the same component holds the same allocation. Memory grows with
/// the distinct names (the incident's cardinality), not with the records.
#[derive(Debug, Default, Clone)]
pub struct NameInterner {
    names: HashSet<Name>,
}

impl NameInterner {
    /// An empty interner.
    pub fn new() -> Self {
        NameInterner::default()
    }

    /// The shared name for `text`, made on first sight.
    pub fn intern(&mut self, text: &str) -> Name {
        if let Some(name) = self.names.get(text) {
            return name.clone();
        }
        let name = Name::new(text);
        self.names.insert(name.clone());
        name
    }

    /// `name`, or the shared name with its text when one was seen before.
    pub fn share(&mut self, name: &Name) -> Name {
        if let Some(seen) = self.names.get(name.as_str()) {
            return seen.clone();
        }
        self.names.insert(name.clone());
        name.clone()
    }

    /// How many distinct names it holds.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_reads_compares_and_serializes_as_its_text() {
        let n = Name::from("ts-order-service");
        assert_eq!(n, "ts-order-service");
        assert_eq!("ts-order-service", n);
        assert_eq!(n, String::from("ts-order-service"));
        assert!(n.starts_with("ts-"));
        assert_eq!(n.to_string(), "ts-order-service");
        assert_eq!(format!("{n:?}"), "\"ts-order-service\"");
        let json = serde_json::to_string(&n).unwrap();
        assert_eq!(json, "\"ts-order-service\"");
        let back: Name = serde_json::from_str(&json).unwrap();
        assert_eq!(back, n);
        let (a, b) = (Name::from("a"), Name::from("b"));
        assert!(a < b);
    }

    #[test]
    fn interning_shares_one_allocation_per_distinct_text() {
        let mut interner = NameInterner::new();
        let a = interner.intern("cart");
        let b = interner.intern(&String::from("cart"));
        let c = interner.intern("orders");
        assert!(a.shares_with(&b));
        assert!(!a.shares_with(&c));
        let d = interner.share(&Name::from("cart"));
        assert!(d.shares_with(&a));
        assert_eq!(interner.len(), 2);
        // A clone shares too; a name made on its own does not.
        assert!(a.clone().shares_with(&a));
        assert!(!Name::from("cart").shares_with(&a));
    }
}
