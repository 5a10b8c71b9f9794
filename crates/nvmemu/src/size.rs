// SPDX-License-Identifier: Apache-2.0
//! Sizes as fio and SPDK users write them: `4G`, `512M`, `4096`, `1GiB`, `4k`.
//! Suffixes are powers of 1024, as fio's default (`kb_base=1024`).

/// Parse a size in bytes; a bare number is bytes. The same grammar as `nvmemu bench`'s
/// sizes, with an error that says what a size looks like.
pub fn parse_size(text: &str) -> Result<u64, String> {
    nvmemu_bench::parse_size(text).map_err(|_| {
        format!("'{text}' is not a size (a number with k, M, G, T or P, e.g. 512, 4k, 64M, 4G)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("4G"), Ok(4 << 30));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert!(parse_size("4X").is_err());
        assert!(parse_size("G").is_err());
        assert!(parse_size("99999999999T").is_err());
    }
}
