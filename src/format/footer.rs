//! The 32-byte footer that ends every archive file of a cache, encoded and
//! decoded here and nowhere else (as tantivy's `directory/footer.rs`).
//!
//! ```text
//! offset  size  field
//!      0     8  magic  b"SCTXSHRD"
//!      8     4  format version, u32 little-endian
//!     12     4  flags, must be 0
//!     16     8  archive length in bytes, u64 little-endian (the file minus the footer)
//!     24     8  xxh3-64 of the archive, u64 little-endian
//! ```

use super::FORMAT_VERSION;

/// Magic bytes at the start of every footer.
pub const MAGIC: [u8; 8] = *b"SCTXSHRD";

/// Size of the footer.
pub const LEN: usize = 32;

/// A decoded footer of the current format version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footer {
    /// Length of the archive before the footer.
    pub archive_len: u64,
    /// xxh3-64 of the archive.
    pub xxh3: u64,
}

/// Why a footer could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FooterError {
    /// Fewer than [`LEN`] bytes.
    TooShort,
    /// Not a socialctx footer.
    Magic,
    /// Written by another format version.
    Version(u32),
    /// Flags this version does not know.
    Flags,
}

impl Footer {
    /// The footer's bytes.
    pub fn encode(&self) -> [u8; LEN] {
        let mut out = [0u8; LEN];
        out[..8].copy_from_slice(&MAGIC);
        out[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        out[16..24].copy_from_slice(&self.archive_len.to_le_bytes());
        out[24..32].copy_from_slice(&self.xxh3.to_le_bytes());
        out
    }

    /// Decodes the footer at the end of `file` (the whole file's bytes).
    pub fn decode(file: &[u8]) -> Result<Footer, FooterError> {
        let Some(start) = file.len().checked_sub(LEN) else {
            return Err(FooterError::TooShort);
        };
        let f = &file[start..];
        let word = |r: std::ops::Range<usize>| {
            let mut b = [0u8; 8];
            b[..r.len()].copy_from_slice(&f[r]);
            u64::from_le_bytes(b)
        };
        if f[..8] != MAGIC {
            return Err(FooterError::Magic);
        }
        let version = word(8..12) as u32;
        if version != FORMAT_VERSION {
            return Err(FooterError::Version(version));
        }
        if word(12..16) != 0 {
            return Err(FooterError::Flags);
        }
        Ok(Footer {
            archive_len: word(16..24),
            xxh3: word(24..32),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects() {
        let f = Footer {
            archive_len: 0x0102_0304_0506_0708,
            xxh3: u64::MAX - 5,
        };
        let mut file = vec![7u8; 3];
        file.extend_from_slice(&f.encode());
        assert_eq!(Footer::decode(&file), Ok(f));
        assert_eq!(Footer::decode(&file[..LEN - 1]), Err(FooterError::TooShort));
        let mut bad = file.clone();
        bad[3] ^= 1;
        assert_eq!(Footer::decode(&bad), Err(FooterError::Magic));
        let mut bad = file.clone();
        bad[3 + 8] = 99;
        assert_eq!(Footer::decode(&bad), Err(FooterError::Version(99)));
        let mut bad = file;
        bad[3 + 13] = 1;
        assert_eq!(Footer::decode(&bad), Err(FooterError::Flags));
    }
}
