//! The `run` request's codec (see run.rs for what the helper does with it):
//! one module, compiled into the helper and into reeval-core (whose
//! `diff/launch.rs` includes it by `#[path]`), so both sides read one layout.
//!
//! After the line `run LENGTH`, LENGTH bytes (integers little-endian, `str` a
//! `u32` length then its bytes, never a NUL):
//!
//! ```text
//! request = u32 uid, u32 gid, str workdir, u32 n, str*n argv, u32 m, str*m "NAME=value",
//!           u8 has-stdin, [u64 length, bytes]
//! ```

/// One command to run: as whom, where, with what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRequest {
    pub uid: u32,
    pub gid: u32,
    /// An absolute directory.
    pub workdir: Vec<u8>,
    /// At least the program.
    pub argv: Vec<Vec<u8>>,
    /// `NAME=value`, each with a name.
    pub env: Vec<Vec<u8>>,
    /// Its stdin; `None`: `/dev/null`.
    pub stdin: Option<Vec<u8>>,
}

impl RunRequest {
    /// The request line and its body; `None` when a field cannot be carried
    /// (a NUL, a count past `u32`) or the request is not one
    /// [`RunRequest::decode`] takes.
    pub fn encode(&self) -> Option<Vec<u8>> {
        if !self.is_whole() {
            return None;
        }
        let mut body = Vec::new();
        body.extend_from_slice(&self.uid.to_le_bytes());
        body.extend_from_slice(&self.gid.to_le_bytes());
        put_str(&mut body, &self.workdir)?;
        put_count(&mut body, self.argv.len())?;
        for arg in &self.argv {
            put_str(&mut body, arg)?;
        }
        put_count(&mut body, self.env.len())?;
        for var in &self.env {
            put_str(&mut body, var)?;
        }
        match &self.stdin {
            None => body.push(0),
            Some(bytes) => {
                body.push(1);
                body.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
                body.extend_from_slice(bytes);
            }
        }
        let mut encoded = format!("run {}\n", body.len()).into_bytes();
        encoded.extend_from_slice(&body);
        Some(encoded)
    }

    /// The request in `raw` (the body, after the line); `None` when it is
    /// not one: short, long, a NUL, no program, a relative directory, a
    /// variable without a name.
    pub fn decode(raw: &[u8]) -> Option<RunRequest> {
        let mut r = Reader { raw, at: 0 };
        let uid = r.u32()?;
        let gid = r.u32()?;
        let workdir = r.string()?;
        let argc = r.u32()? as usize;
        let argv = (0..argc).map(|_| r.string()).collect::<Option<Vec<_>>>()?;
        let envc = r.u32()? as usize;
        let env = (0..envc).map(|_| r.string()).collect::<Option<Vec<_>>>()?;
        let stdin = match *r.take(1)?.first()? {
            0 => None,
            1 => {
                let n = usize::try_from(u64::from_le_bytes(r.take(8)?.try_into().ok()?)).ok()?;
                Some(r.take(n)?.to_vec())
            }
            _ => return None,
        };
        let request = RunRequest { uid, gid, workdir, argv, env, stdin };
        (r.at == raw.len() && request.is_whole()).then_some(request)
    }

    /// A program, an absolute directory, every variable named.
    fn is_whole(&self) -> bool {
        let named = |v: &Vec<u8>| v.iter().position(|b| *b == b'=').is_some_and(|i| i > 0);
        !self.argv.is_empty() && self.workdir.starts_with(b"/") && self.env.iter().all(named)
    }
}

fn put_count(body: &mut Vec<u8>, n: usize) -> Option<()> {
    body.extend_from_slice(&u32::try_from(n).ok()?.to_le_bytes());
    Some(())
}

/// A `str`: no NUL, which no argv or variable can hold.
fn put_str(body: &mut Vec<u8>, s: &[u8]) -> Option<()> {
    if s.contains(&0) {
        return None;
    }
    put_count(body, s.len())?;
    body.extend_from_slice(s);
    Some(())
}

/// Reads a request's fields in order.
struct Reader<'a> {
    raw: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let bytes = self.raw.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(bytes)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn string(&mut self) -> Option<Vec<u8>> {
        let n = self.u32()? as usize;
        let s = self.take(n)?;
        (!s.contains(&0)).then(|| s.to_vec())
    }
}
