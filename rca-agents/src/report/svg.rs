//! Helpers shared by the HTML report's drawings: escaping, shortening, number and time labels.

use rca_core::Timestamp;

/// Escapes text for HTML and SVG element content and attribute values.
pub(crate) fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters are not allowed in XML text (SVG is parsed as XML when the page
            // is opened as an `.svg`); show them as spaces.
            c if c.is_control() && c != '\n' && c != '\t' => out.push(' '),
            _ => out.push(c),
        }
    }
    out
}

/// A stable id for a graph node: `node-` plus the name with everything but ASCII letters,
/// digits, `-` and `_` replaced by `_`.
pub(crate) fn node_id(name: &str) -> String {
    let mut id = String::from("node-");
    id.extend(name.chars().map(|c| {
        if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
            c
        } else {
            '_'
        }
    }));
    id
}

/// `text` cut to at most `max` characters, the cut marked with an ellipsis.
pub(crate) fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let head: String = text.chars().take(max.saturating_sub(1)).collect();
        format!("{head}…")
    }
}

/// A coordinate with one decimal (SVG needs no more).
pub(crate) fn px(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.1}")
    } else {
        "0".to_string()
    }
}

/// A value for an axis or a label: at most four significant digits, with k/M/G for large ones.
pub(crate) fn number(v: f64) -> String {
    if !v.is_finite() {
        return "-".to_string();
    }
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let a = scaled.abs();
    let text = if a == 0.0 {
        "0".to_string()
    } else if a >= 100.0 {
        format!("{scaled:.0}")
    } else if a >= 10.0 {
        format!("{scaled:.1}")
    } else if a >= 1.0 {
        format!("{scaled:.2}")
    } else if a >= 0.001 {
        format!("{scaled:.3}")
    } else {
        format!("{scaled:.1e}")
    };
    // 12.50 -> 12.5, 3.000 -> 3 (not for exponent forms).
    let text = if text.contains('.') && !text.contains('e') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    };
    format!("{text}{suffix}")
}

/// The UTC time of day, `HH:MM:SS`.
pub(crate) fn clock(t: Timestamp) -> String {
    let (_, _, _, h, mi, s, _) = t.to_civil();
    format!("{h:02}:{mi:02}:{s:02}")
}

/// A length of time in milliseconds, in the largest whole units (`4 h 42 min`, `4 min 57 s`,
/// `850 ms`).
pub(crate) fn span_of_millis(ms: i64) -> String {
    let ms = ms.max(0);
    let (h, m, s) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60);
    if h > 0 {
        format!("{h} h {m} min")
    } else if m > 0 {
        format!("{m} min {s} s")
    } else if s > 0 {
        format!("{s} s")
    } else {
        format!("{ms} ms")
    }
}

/// A duration in microseconds: `956 µs`, `502.7 ms`, `1.09 s`.
pub(crate) fn micros(us: f64) -> String {
    if !us.is_finite() || us < 0.0 {
        "-".to_string()
    } else if us < 1000.0 {
        format!("{us:.0} µs")
    } else if us < 1e6 {
        format!("{} ms", number(us / 1000.0))
    } else {
        format!("{} s", number(us / 1e6))
    }
}

/// About `count` round tick values covering `[lo, hi]`.
pub(crate) fn ticks(lo: f64, hi: f64, count: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo || count == 0 {
        return Vec::new();
    }
    let raw = (hi - lo) / count as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(magnitude * 10.0);
    let mut out = Vec::new();
    let mut v = (lo / step).ceil() * step;
    while v <= hi + step * 1e-9 && out.len() <= count * 2 {
        // -0 and float noise (0.30000000000000004) read badly.
        out.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
        v += step;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_control_characters() {
        assert_eq!(esc("a<b>&\"'\u{7}"), "a&lt;b&gt;&amp;&quot;&#39; ");
        assert_eq!(node_id("ts/a b"), "node-ts_a_b");
        assert_eq!(shorten("abcdef", 4), "abc…");
        assert_eq!(shorten("abc", 4), "abc");
    }

    #[test]
    fn labels_read_well() {
        assert_eq!(number(0.905), "0.905");
        assert_eq!(number(120.37), "120");
        assert_eq!(number(12.5), "12.5");
        assert_eq!(number(3.0), "3");
        assert_eq!(number(25_000.0), "25k");
        assert_eq!(number(f64::NAN), "-");
        assert_eq!(micros(956.0), "956 µs");
        assert_eq!(micros(502_728.0), "503 ms");
        assert_eq!(micros(1_089_782.0), "1.09 s");
        assert_eq!(span_of_millis(16_988_522), "4 h 43 min");
        assert_eq!(span_of_millis(297_387), "4 min 57 s");
        let t = Timestamp::from_civil(2023, 1, 29, 13, 30, 27, 613).unwrap();
        assert_eq!(clock(t), "13:30:27");
    }

    #[test]
    fn ticks_are_round_and_inside() {
        assert_eq!(ticks(0.0, 100.0, 4), vec![0.0, 25.0, 50.0, 75.0, 100.0]);
        let t = ticks(0.91, 4.2, 4);
        assert!(t.iter().all(|v| (0.91..=4.2).contains(v)), "{t:?}");
        assert!(ticks(1.0, 1.0, 4).is_empty());
        assert!(ticks(f64::NAN, 1.0, 4).is_empty());
    }
}
