//! The per-run certificate authority that signs a leaf certificate for each
//! intercepted host, and the TLS server configurations built from them.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use secrecy::SecretString;
use time::{Duration, OffsetDateTime};

use crate::error::GatewayError;

/// The common name every reeval CA starts with; the rest is derived from its key.
const CA_NAME_PREFIX: &str = "reeval egress gateway CA ";
/// How long a generated CA is valid; a run outlives nothing like this.
const CA_VALIDITY_DAYS: i64 = 30;
/// Leaf validity; short, because leaves are re-made per gateway anyway.
const LEAF_VALIDITY_DAYS: i64 = 7;
/// Clock skew tolerated between the host and the sandbox.
const BACKDATE: Duration = Duration::hours(1);

/// A certificate authority made for one run (or loaded from PEM that a
/// reeval CA wrote), with a cache of leaf certificates per host.
///
/// Its key never leaves the process unless [`CertificateAuthority::key_pem`]
/// is called, and Debug shows only the certificate's name.
pub struct CertificateAuthority {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
    name: String,
    leaves: Mutex<HashMap<String, Arc<ServerConfig>>>,
}

impl fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertificateAuthority").field("name", &self.name).finish_non_exhaustive()
    }
}

impl CertificateAuthority {
    /// Makes a fresh CA (ECDSA P-256, valid from an hour ago for 30 days).
    ///
    /// # Errors
    ///
    /// [`GatewayError::Certificate`] if key generation or signing fails.
    pub fn generate() -> Result<Self, GatewayError> {
        let key =
            KeyPair::generate().map_err(|e| GatewayError::certificate("generate the CA key", e))?;
        let now = OffsetDateTime::from(SystemTime::now());
        let params = ca_params(&key, now - BACKDATE, now + Duration::days(CA_VALIDITY_DAYS));
        let cert = params
            .self_signed(&key)
            .map_err(|e| GatewayError::certificate("sign the CA certificate", e))?;
        Ok(Self::from_parts(params, key, cert.pem()))
    }

    /// Loads a CA that [`CertificateAuthority::generate`] made earlier (for
    /// example by `reeval-gateway gen-ca`), from its certificate and key PEM.
    ///
    /// Only reeval CAs can be loaded: the issuer name of a leaf must equal
    /// the CA's subject byte for byte, and without an X.509 parser that name
    /// is rebuilt from the key.
    ///
    /// # Errors
    ///
    /// [`GatewayError::Certificate`] when the key does not parse, or the
    /// certificate is not a reeval CA for this key.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Self, GatewayError> {
        let key = KeyPair::from_pem(key_pem)
            .map_err(|e| GatewayError::certificate("parse the CA key PEM", e))?;
        let cert_der = rustls::pki_types::pem::PemObject::from_pem_slice(cert_pem.as_bytes())
            .map(|c: CertificateDer<'static>| c.to_vec())
            .map_err(|e| GatewayError::certificate("parse the CA certificate PEM", e))?;
        // Validity dates only matter when signing the CA itself, which is not redone here.
        let params = ca_params(&key, OffsetDateTime::UNIX_EPOCH, OffsetDateTime::UNIX_EPOCH);
        let name = common_name(&key);
        if !contains(&cert_der, key.public_key_raw()) || !contains(&cert_der, name.as_bytes()) {
            return Err(GatewayError::certificate(
                "load the CA",
                "the certificate is not a reeval gateway CA for this key (make one with `reeval-gateway gen-ca`)",
            ));
        }
        Ok(Self::from_parts(params, key, cert_pem.to_owned()))
    }

    fn from_parts(params: CertificateParams, key: KeyPair, cert_pem: String) -> Self {
        let name = common_name(&key);
        CertificateAuthority {
            issuer: Issuer::new(params, key),
            cert_pem,
            name,
            leaves: Mutex::new(HashMap::new()),
        }
    }

    /// The CA certificate, PEM: install it in the sandbox's trust store.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA's private key, PEM, to hand to a `reeval-gateway` process.
    pub fn key_pem(&self) -> SecretString {
        SecretString::from(self.issuer.key().serialize_pem())
    }

    /// The TLS server configuration presenting a leaf for `host` (cached per
    /// host). ALPN offers HTTP/2 and HTTP/1.1.
    pub(crate) fn server_config(&self, host: &str) -> Result<Arc<ServerConfig>, GatewayError> {
        let mut leaves = self.leaves.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(config) = leaves.get(host) {
            return Ok(config.clone());
        }
        let config = Arc::new(self.make_server_config(host)?);
        leaves.insert(host.to_owned(), config.clone());
        Ok(config)
    }

    fn make_server_config(&self, host: &str) -> Result<ServerConfig, GatewayError> {
        let op = || format!("issue a leaf certificate for {host}");
        let key = KeyPair::generate().map_err(|e| GatewayError::certificate(op(), e))?;
        let mut params = CertificateParams::new(vec![host.to_owned()])
            .map_err(|e| GatewayError::certificate(op(), e))?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, host);
        params.distinguished_name = dn;
        let now = OffsetDateTime::from(SystemTime::now());
        params.not_before = now - BACKDATE;
        params.not_after = now + Duration::days(LEAF_VALIDITY_DAYS);
        params.is_ca = IsCa::NoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let cert =
            params.signed_by(&key, &self.issuer).map_err(|e| GatewayError::certificate(op(), e))?;
        let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut config = ServerConfig::builder_with_provider(crate::trust::crypto_provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| GatewayError::certificate(op(), e))?
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key_der)
            .map_err(|e| GatewayError::certificate(op(), e))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// The CA's subject name is derived from its key, so a loaded CA can rebuild it.
fn common_name(key: &KeyPair) -> String {
    let id = CertificateParams::default().key_identifier(key);
    let hex: String = id.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("{CA_NAME_PREFIX}{hex}")
}

fn ca_params(
    key: &KeyPair,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name(key));
    dn.push(DnType::OrganizationName, "reeval");
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = not_before;
    params.not_after = not_after;
    params
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    #[test]
    fn generated_ca_round_trips_through_pem() {
        let ca = CertificateAuthority::generate().unwrap();
        let loaded =
            CertificateAuthority::from_pem(ca.cert_pem(), ca.key_pem().expose_secret()).unwrap();
        assert_eq!(loaded.name, ca.name);
        assert!(loaded.server_config("api.example.com").is_ok());
        let other = CertificateAuthority::generate().unwrap();
        assert!(
            CertificateAuthority::from_pem(ca.cert_pem(), other.key_pem().expose_secret()).is_err()
        );
        assert!(!format!("{ca:?}").contains("PRIVATE"));
    }

    #[test]
    fn leaves_are_cached_per_host() {
        let ca = CertificateAuthority::generate().unwrap();
        let a = ca.server_config("a.example.com").unwrap();
        let b = ca.server_config("a.example.com").unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(ca.server_config("127.0.0.1").is_ok());
    }
}
