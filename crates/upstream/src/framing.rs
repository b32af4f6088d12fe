//! Newline-delimited framing with a bounded line length, read as a sequence of [`Line`]s.
//!
//! A line longer than the limit is reported once as [`Line::Oversized`] and skipped, without ever being held whole
//! in memory; reading then goes on. This hides a quirk of `tokio_util`'s `FramedRead`: after a decoding error it
//! yields `None` once before reading on (tokio #3976), which naive loops take for the end of input.

use bytes::BytesMut;
use futures::StreamExt;
use tokio::io::AsyncRead;
use tokio_util::codec::{AnyDelimiterCodec, AnyDelimiterCodecError, FramedRead};

/// What reading one line gave.
#[derive(Debug)]
pub enum Line {
    /// A complete line, without its newline.
    Text(BytesMut),
    /// A line longer than the limit was skipped.
    Oversized,
}

/// A reader split into bounded lines.
pub struct Lines<R> {
    frames: FramedRead<R, AnyDelimiterCodec>,
    after_error: bool,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    /// Lines of at most `max_line_bytes` bytes from `reader`.
    pub fn new(reader: R, max_line_bytes: usize) -> Lines<R> {
        let codec = AnyDelimiterCodec::new_with_max_length(b"\n".to_vec(), Vec::new(), max_line_bytes);
        Lines { frames: FramedRead::new(reader, codec), after_error: false }
    }

    /// The next line; `None` at the end of input; `Err` when reading failed.
    pub async fn next_line(&mut self) -> Option<std::io::Result<Line>> {
        loop {
            match self.frames.next().await {
                Some(Ok(bytes)) => {
                    self.after_error = false;
                    return Some(Ok(Line::Text(BytesMut::from(&bytes[..]))));
                }
                Some(Err(AnyDelimiterCodecError::MaxChunkLengthExceeded)) => {
                    self.after_error = true;
                    return Some(Ok(Line::Oversized));
                }
                Some(Err(AnyDelimiterCodecError::Io(error))) => return Some(Err(error)),
                None if std::mem::take(&mut self.after_error) => {}
                None => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_oversized_line_is_reported_once_and_reading_goes_on() {
        let input: &[u8] = b"short\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\nafter\n";
        let mut lines = Lines::new(input, 10);
        let mut seen = Vec::new();
        while let Some(line) = lines.next_line().await {
            seen.push(match line {
                Ok(Line::Text(text)) => String::from_utf8_lossy(&text).into_owned(),
                Ok(Line::Oversized) => "<oversized>".to_owned(),
                Err(error) => format!("<error {error}>"),
            });
        }
        assert_eq!(seen, ["short", "<oversized>", "after"]);
    }
}
