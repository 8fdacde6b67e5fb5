//! What this host trusts beyond the public roots: the certificates of its
//! trust store that webpki-roots lacks (a company's own CA, the CA of an
//! intercepting proxy). The gateway trusts them upstream, so brokered
//! requests verify through such a proxy; the sandbox trusts them too, so a
//! tunnel it opens through the gateway verifies as it would on this host.
//! And the one crypto provider both sides of the gateway's TLS use.

use std::sync::Arc;

use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::CertificateDer;

/// The certificates of this host's trust store that are not among the
/// public roots.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostRoots {
    /// Them, as PEM (empty when there are none).
    pub pem: String,
    /// How many.
    pub count: usize,
}

impl HostRoots {
    /// Reads this host's trust store (as `rustls-native-certs` finds it:
    /// `SSL_CERT_FILE`, `SSL_CERT_DIR`, the system's bundle) and keeps what
    /// webpki-roots lacks. Certificates that do not parse are left out;
    /// a store that cannot be read gives none.
    pub fn load() -> Self {
        Self::beyond_public(&rustls_native_certs::load_native_certs().certs)
    }

    /// Those of `certs` that are not public roots (by subject and key), once each.
    pub fn beyond_public(certs: &[CertificateDer<'_>]) -> Self {
        let public: Vec<(&[u8], &[u8])> = webpki_roots::TLS_SERVER_ROOTS
            .iter()
            .map(|a| (a.subject.as_ref(), a.subject_public_key_info.as_ref()))
            .collect();
        let mut seen = Vec::new();
        let mut out = HostRoots::default();
        for cert in certs {
            let mut one = RootCertStore::empty();
            if one.add(cert.clone()).is_err() {
                continue;
            }
            let anchor = &one.roots[0];
            let id = (anchor.subject.to_vec(), anchor.subject_public_key_info.to_vec());
            if public.contains(&(id.0.as_slice(), id.1.as_slice())) || seen.contains(&id) {
                continue;
            }
            seen.push(id);
            out.pem.push_str(&pem(cert));
            out.count += 1;
        }
        out
    }
}

fn pem(cert: &CertificateDer<'_>) -> String {
    use base64::Engine;
    let body = base64::engine::general_purpose::STANDARD.encode(cert.as_ref());
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in body.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// The ring provider, explicitly: the process-wide default is never relied on.
pub(crate) fn crypto_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::pem::PemObject;

    #[test]
    fn only_what_the_public_roots_lack_is_kept() {
        let ca = crate::CertificateAuthority::generate().unwrap();
        let ours = CertificateDer::from_pem_slice(ca.cert_pem().as_bytes()).unwrap();
        // A public root, as a system bundle holds it: webpki's anchors are not
        // certificates, so the host's own store gives one (Debian's bundle has them).
        let host = rustls_native_certs::load_native_certs().certs;
        let public = host.iter().find(|c| HostRoots::beyond_public(&[(*c).clone()]).count == 0);
        let mut certs = vec![ours.clone(), ours];
        certs.extend(public.cloned());
        let kept = HostRoots::beyond_public(&certs);
        assert_eq!(kept.count, 1, "ours once, the public root not at all");
        let back: Vec<_> = CertificateDer::pem_slice_iter(kept.pem.as_bytes()).collect();
        assert_eq!(back.len(), 1);
        assert!(public.is_some(), "the host's store holds public roots");
    }
}
