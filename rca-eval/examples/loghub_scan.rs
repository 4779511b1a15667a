//! Development aid: prints the Loghub scores of a folder (same as `rca eval loghub`); with a
//! system name as fourth argument, dumps `template_id<TAB>template<TAB>content` per line.
#![allow(clippy::unwrap_used, missing_docs)]
use rca_core::logs::TemplateMiner;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let formats =
        rca_eval::loghub::parse_formats(&std::fs::read_to_string(&args[2]).unwrap()).unwrap();
    let threads = args.get(3).map(|t| t.parse().unwrap()).unwrap_or(1);
    if let Some(sys) = args.get(4) {
        let f = formats.iter().find(|f| &f.system == sys).unwrap();
        let fmt = rca_tools::logs::LogFormat::parse(&f.pattern).unwrap();
        let bytes = std::fs::read(format!("{}/{sys}/{sys}_2k.log", args[1])).unwrap();
        let (lines, _) = rca_tools::logs::read_lines(&bytes, 1 << 20);
        let contents: Vec<&str> = lines
            .iter()
            .map(|l| fmt.parse_line(l).map(|p| p.content).unwrap_or(l.trim()))
            .collect();
        let (m, ids) = rca_tools::logs::mine_parallel(&contents, &cfg(), threads).unwrap();
        for (id, c) in ids.iter().zip(&contents) {
            println!("{id}\t{}\t{c}", m.template(*id).unwrap().text);
        }
        return;
    }
    let r = rca_eval::loghub::evaluate(std::path::Path::new(&args[1]), &formats, &cfg(), threads)
        .unwrap();
    println!("{}", r.to_markdown());
}

fn cfg() -> rca_tools::logs::MinerConfig {
    let mut c = rca_eval::loghub::default_config();
    if let Ok(v) = std::env::var("V") {
        c.variable_threshold = v.parse().unwrap();
    }
    if let Ok(v) = std::env::var("VV") {
        c.value_threshold = v.parse().unwrap();
    }
    c
}
