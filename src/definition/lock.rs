// The locked dependencies that compute stored values: `include!`d by
// `build.rs` and by the tests. Plain std, no dependency (a build script).

/// Packages whose code computes values a cache stores: JSON parsing
/// (numbers and strings), the archive format, content keys, the label
/// files, and pycompat's calendar, search and tokenizer pattern.
#[allow(dead_code)]
const VALUE_DEPENDENCIES: &[&str] = &[
    "simd-json",
    "serde_json",
    "rkyv",
    "xxhash-rust",
    "csv",
    "chrono",
    "memchr",
    "regex-automata",
];

/// `name version` of every package of `lock` (a Cargo.lock's text) that
/// `roots` are or depend on, sorted: a dependency bump that could change a
/// stored value changes it, a bump of anything else (the command's parser,
/// the tests' tools) does not. Every version of a name that is locked
/// twice is taken (more is only a full build more).
#[allow(dead_code)]
fn locked_closure(lock: &str, roots: &[&str]) -> Vec<String> {
    use std::collections::{BTreeMap, BTreeSet};
    // name -> [(version, dependency names)]
    let mut packages: BTreeMap<String, Vec<(String, Vec<String>)>> = BTreeMap::new();
    for block in lock.split("[[package]]").skip(1) {
        let field = |key: &str| {
            block.lines().find_map(|l| {
                l.strip_prefix(key)
                    .and_then(|r| r.trim().strip_prefix('='))
                    .map(|v| v.trim().trim_matches('"').to_owned())
            })
        };
        let (Some(name), Some(version)) = (field("name "), field("version ")) else {
            continue;
        };
        let deps = block
            .split_once("dependencies = [")
            .map(|(_, rest)| rest.split(']').next().unwrap_or(""))
            .unwrap_or("")
            .split(',')
            .filter_map(|d| d.trim().trim_matches('"').split(' ').next())
            .filter(|d| !d.is_empty())
            .map(str::to_owned)
            .collect();
        packages.entry(name).or_default().push((version, deps));
    }
    let mut seen = BTreeSet::new();
    let mut out = BTreeSet::new();
    let mut todo: Vec<String> = roots.iter().map(|r| (*r).to_owned()).collect();
    while let Some(name) = todo.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        for (version, deps) in packages.get(&name).into_iter().flatten() {
            out.insert(format!("{name} {version}"));
            todo.extend(deps.iter().cloned());
        }
    }
    out.into_iter().collect()
}
