//! TLS for the PostgreSQL store, with libpq's conventions in the connection
//! string: `sslmode` (`disable`, `prefer` (the default), `require`,
//! `verify-ca`, `verify-full`), `sslrootcert` (a PEM file of trusted CAs, or
//! `system`; the system's roots when none is given), `sslcert` + `sslkey` (a
//! client certificate), `sslsni`. The client (tokio-postgres) knows only
//! `disable`/`prefer`/`require` and none of the file options, so they are
//! taken out of the string here and become a rustls configuration (ring, no
//! OpenSSL: the addon links statically on the glibc 2.28 and musl targets).

use crate::error::{Code, CoreError, CoreResult};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use std::path::PathBuf;
use std::sync::Arc;
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// libpq's `sslmode` values this store implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Disable => "disable",
            Mode::Prefer => "prefer",
            Mode::Require => "require",
            Mode::VerifyCa => "verify-ca",
            Mode::VerifyFull => "verify-full",
        }
    }
}

/// Where trusted CA certificates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Roots {
    /// The system's trust store (`sslrootcert=system`, or none given).
    System,
    /// A PEM file (`sslrootcert=<file>`).
    File(PathBuf),
}

/// The TLS options of one connection string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsOptions {
    pub mode: Mode,
    pub roots: Roots,
    /// Whether `sslrootcert` named a file (libpq then verifies the chain
    /// in `require` mode too, as `verify-ca`).
    explicit_roots: bool,
    /// `sslcert` and `sslkey`: a client certificate and its key (PEM).
    client: Option<(PathBuf, PathBuf)>,
    /// `sslsni=0` turns the server name indication off.
    sni: bool,
}

impl TlsOptions {
    /// The mode after libpq's rule: `require` with a root certificate file
    /// verifies the chain as `verify-ca` does.
    pub fn effective_mode(&self) -> Mode {
        match self.mode {
            Mode::Require if self.explicit_roots => Mode::VerifyCa,
            m => m,
        }
    }

    /// What tokio-postgres is told: whether to ask for TLS and whether to
    /// accept a server that refuses it.
    pub fn client_mode(&self) -> SslMode {
        match self.mode {
            Mode::Disable => SslMode::Disable,
            Mode::Prefer => SslMode::Prefer,
            Mode::Require | Mode::VerifyCa | Mode::VerifyFull => SslMode::Require,
        }
    }

    /// The rustls connector for these options, reading the files they
    /// name; `None` for `sslmode=disable`.
    pub fn connector(&self) -> CoreResult<Option<MakeRustlsConnect>> {
        if self.mode == Mode::Disable {
            return Ok(None);
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mode = self.effective_mode();
        let roots = match mode {
            Mode::Disable | Mode::Prefer | Mode::Require => None,
            Mode::VerifyCa | Mode::VerifyFull => Some(Arc::new(self.root_store()?)),
        };
        let verifier: Arc<dyn ServerCertVerifier> = Arc::new(Verifier {
            roots,
            provider: provider.clone(),
            check_name: mode == Mode::VerifyFull,
        });
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| tls_setup(format!("no TLS protocol version is available: {e}")))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let mut config = match &self.client {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = CertificateDer::pem_file_iter(cert)
                    .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| {
                        tls_setup(format!("cannot read sslcert \"{}\": {e}", cert.display()))
                    })?;
                if chain.is_empty() {
                    return Err(tls_setup(format!(
                        "sslcert \"{}\" holds no PEM certificate",
                        cert.display()
                    )));
                }
                let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                    tls_setup(format!("cannot read sslkey \"{}\": {e}", key.display()))
                })?;
                builder.with_client_auth_cert(chain, key_der).map_err(|e| {
                    tls_setup(format!(
                        "sslcert \"{}\" and sslkey \"{}\" do not make a client certificate: {e}",
                        cert.display(),
                        key.display()
                    ))
                })?
            }
        };
        config.enable_sni = self.sni;
        Ok(Some(MakeRustlsConnect::new(config)))
    }

    fn root_store(&self) -> CoreResult<RootCertStore> {
        let mut store = RootCertStore::empty();
        match &self.roots {
            Roots::File(path) => {
                let certs = CertificateDer::pem_file_iter(path)
                    .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| {
                        tls_setup(format!(
                            "cannot read sslrootcert \"{}\": {e}",
                            path.display()
                        ))
                    })?;
                let (added, _) = store.add_parsable_certificates(certs);
                if added == 0 {
                    return Err(tls_setup(format!(
                        "sslrootcert \"{}\" holds no usable PEM certificate",
                        path.display()
                    )));
                }
            }
            Roots::System => {
                let found = rustls_native_certs::load_native_certs();
                let (added, _) = store.add_parsable_certificates(found.certs);
                if added == 0 {
                    return Err(tls_setup(format!(
                        "sslmode={} needs trusted root certificates and the system has none; set sslrootcert to the CA's PEM file",
                        self.effective_mode().name()
                    )));
                }
            }
        }
        Ok(store)
    }

    /// Why a connection attempt that failed in its TLS part failed, in
    /// words naming the cause (certificate, host name, a server without
    /// TLS, one that requires it), or `None` when it was not about TLS.
    pub fn explain(&self, e: &tokio_postgres::Error, host: &str) -> Option<String> {
        if let Some(db) = e.as_db_error() {
            // pg_hba.conf refused a connection without encryption.
            if db.code().code() == "28000" && db.message().contains("no encryption") {
                return Some(format!(
                    "the server requires TLS for this connection (sslmode={}): use sslmode=require, verify-ca or verify-full",
                    self.mode.name()
                ));
            }
            return None;
        }
        if chain(e).any(|s| s.to_string().contains("server does not support TLS")) {
            return Some(format!(
                "the server does not accept TLS connections, and sslmode={} requires TLS",
                self.mode.name()
            ));
        }
        let rustls_error = chain(e).find_map(|s| {
            s.downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                .or_else(|| s.downcast_ref::<rustls::Error>())
        })?;
        let roots = match &self.roots {
            Roots::File(p) => format!("sslrootcert \"{}\"", p.display()),
            Roots::System => "the system's trusted roots (set sslrootcert to use a CA file)".into(),
        };
        Some(match rustls_error {
            rustls::Error::InvalidCertificate(c) => match c {
                CertificateError::UnknownIssuer | CertificateError::BadSignature => format!(
                    "TLS handshake failed: the server's certificate is not signed by a trusted certificate authority ({roots}; sslmode={})",
                    self.effective_mode().name()
                ),
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => format!(
                    "TLS handshake failed: the server's certificate is not valid for host \"{host}\" (sslmode=verify-full checks the host name; {rustls_error})"
                ),
                CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                    format!("TLS handshake failed: the server's certificate has expired ({rustls_error})")
                }
                _ => format!("TLS handshake failed: the server's certificate was refused ({rustls_error})"),
            },
            other => format!("TLS handshake failed: {other}"),
        })
    }
}

impl Default for TlsOptions {
    fn default() -> TlsOptions {
        TlsOptions {
            mode: Mode::Prefer,
            roots: Roots::System,
            explicit_roots: false,
            client: None,
            sni: true,
        }
    }
}

fn chain<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(e), |e| e.source())
}

fn tls_setup(message: String) -> CoreError {
    CoreError::new(Code::PgConnect, message)
}

fn invalid(message: String) -> CoreError {
    CoreError::new(Code::InvalidArgument, format!(
        "PostgresSessionStore connectionString is not a valid PostgreSQL connection string: {message}"
    ))
}

/// The options this module takes out of a connection string.
const TLS_KEYS: [&str; 6] = [
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "sslsni",
    "sslcompression",
];

/// libpq options the client cannot honour: refused by name rather than
/// ignored (a CRL or an encrypted key ignored would weaken what was asked).
const UNSUPPORTED: [&str; 4] = ["sslcrl", "sslcrldir", "sslpassword", "requiressl"];

/// Take the TLS options out of `conn` (a URL or key=value string): the
/// rest, for tokio-postgres, and the options.
pub fn split(conn: &str) -> CoreResult<(String, TlsOptions)> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    let rest = if let Some(query_at) = url_query(conn) {
        let (base, query) = conn.split_at(query_at);
        let mut kept: Vec<&str> = Vec::new();
        for part in query[1..].split('&').filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            let key = percent_decode(k)?;
            if TLS_KEYS.contains(&key.as_str()) || UNSUPPORTED.contains(&key.as_str()) {
                pairs.push((key, percent_decode(v)?));
            } else {
                kept.push(part);
            }
        }
        if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        }
    } else if conn.starts_with("postgres://") || conn.starts_with("postgresql://") {
        conn.to_string()
    } else {
        let mut kept = String::new();
        for (key, value, raw) in key_values(conn)? {
            if TLS_KEYS.contains(&key.as_str()) || UNSUPPORTED.contains(&key.as_str()) {
                pairs.push((key, value));
            } else {
                if !kept.is_empty() {
                    kept.push(' ');
                }
                kept.push_str(raw);
            }
        }
        kept
    };
    let mut options = TlsOptions::default();
    let mut cert = None;
    let mut key = None;
    for (k, v) in pairs {
        match k.as_str() {
            "sslmode" => {
                options.mode = match v.as_str() {
                    "disable" => Mode::Disable,
                    "prefer" => Mode::Prefer,
                    "require" => Mode::Require,
                    "verify-ca" => Mode::VerifyCa,
                    "verify-full" => Mode::VerifyFull,
                    other => {
                        return Err(invalid(format!(
                            "sslmode {} is not one of disable, prefer, require, verify-ca, verify-full",
                            crate::json::quote(other)
                        )))
                    }
                }
            }
            "sslrootcert" if v == "system" => {
                options.roots = Roots::System;
                options.explicit_roots = false;
            }
            "sslrootcert" => {
                options.roots = Roots::File(PathBuf::from(v));
                options.explicit_roots = true;
            }
            "sslcert" => cert = Some(PathBuf::from(v)),
            "sslkey" => key = Some(PathBuf::from(v)),
            "sslsni" => options.sni = v != "0",
            // Ignored by libpq since PostgreSQL 14 as well.
            "sslcompression" => {}
            other => {
                return Err(invalid(format!(
                    "{other} is not supported by this client (TLS options: sslmode, sslrootcert, sslcert, sslkey, sslsni)"
                )))
            }
        }
    }
    options.client = match (cert, key) {
        (None, None) => None,
        (Some(c), Some(k)) => Some((c, k)),
        _ => return Err(invalid("sslcert and sslkey must be given together".into())),
    };
    Ok((rest, options))
}

/// Where the query string of a `postgres://` URL starts, if it has one.
fn url_query(conn: &str) -> Option<usize> {
    if !(conn.starts_with("postgres://") || conn.starts_with("postgresql://")) {
        return None;
    }
    conn.find('?')
}

fn percent_decode(s: &str) -> CoreResult<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| {
                    invalid(format!("bad percent-encoding in {}", crate::json::quote(s)))
                })?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| {
        invalid(format!(
            "{} is not UTF-8 once decoded",
            crate::json::quote(s)
        ))
    })
}

/// The `key = value` pairs of a libpq keyword/value string, each with its
/// decoded value and its original text.
fn key_values(conn: &str) -> CoreResult<Vec<(String, String, &str)>> {
    let mut out = Vec::new();
    let bytes = conn.as_bytes();
    let mut i = 0;
    let skip_ws = |i: &mut usize| {
        while *i < bytes.len() && bytes[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    loop {
        skip_ws(&mut i);
        if i >= bytes.len() {
            return Ok(out);
        }
        let start = i;
        while i < bytes.len() && bytes[i] != b'=' && !bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let key = conn[start..i].to_string();
        skip_ws(&mut i);
        if i >= bytes.len() || bytes[i] != b'=' {
            return Err(invalid(format!(
                "missing \"=\" after {}",
                crate::json::quote(&key)
            )));
        }
        i += 1;
        skip_ws(&mut i);
        let mut value = Vec::new();
        if i < bytes.len() && bytes[i] == b'\'' {
            i += 1;
            loop {
                match bytes.get(i) {
                    None => return Err(invalid(format!("unterminated quoted value of {key}"))),
                    Some(b'\'') => {
                        i += 1;
                        break;
                    }
                    Some(b'\\') if i + 1 < bytes.len() => {
                        value.push(bytes[i + 1]);
                        i += 2;
                    }
                    Some(&b) => {
                        value.push(b);
                        i += 1;
                    }
                }
            }
        } else {
            while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
                if bytes[i] == b'\\' && i + 1 < bytes.len() {
                    i += 1;
                }
                value.push(bytes[i]);
                i += 1;
            }
        }
        let value = String::from_utf8(value)
            .map_err(|_| invalid(format!("the value of {key} is not UTF-8")))?;
        out.push((key, value, &conn[start..i]));
    }
}

/// How the server's certificate is checked: not at all for `require` and
/// `prefer` (libpq's behaviour: encrypted, the handshake's signatures still
/// checked), against `roots` for `verify-ca`, and its host name too for
/// `verify-full`.
#[derive(Debug)]
struct Verifier {
    roots: Option<Arc<RootCertStore>>,
    provider: Arc<CryptoProvider>,
    check_name: bool,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(roots) = &self.roots else {
            return Ok(ServerCertVerified::assertion());
        };
        let cert = rustls::server::ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        if self.check_name {
            rustls::client::verify_server_name(&cert, server_name)?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_options_leave_the_connection_string() {
        let (rest, o) = split(
            "postgres://u@h:5432/db?application_name=x&sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&connect_timeout=3",
        )
        .unwrap();
        assert_eq!(
            rest,
            "postgres://u@h:5432/db?application_name=x&connect_timeout=3"
        );
        assert_eq!(o.mode, Mode::VerifyFull);
        assert_eq!(o.roots, Roots::File("/tmp/ca.pem".into()));
        let (rest, o) = split("postgres://u@h/db?sslmode=require").unwrap();
        assert_eq!(
            (rest.as_str(), o.effective_mode()),
            ("postgres://u@h/db", Mode::Require)
        );
        let (rest, o) =
            split("host=h user=u sslmode = 'verify-ca' sslrootcert='/a b/c\\'s.pem' dbname=d")
                .unwrap();
        assert_eq!(rest, "host=h user=u dbname=d");
        assert_eq!(o.mode, Mode::VerifyCa);
        assert_eq!(o.roots, Roots::File("/a b/c's.pem".into()));
        // libpq: require with a root certificate file verifies the chain.
        let (_, o) = split("postgres://h/db?sslmode=require&sslrootcert=/ca.pem").unwrap();
        assert_eq!(o.effective_mode(), Mode::VerifyCa);
        let (_, o) = split("postgres://h/db?sslrootcert=system&sslmode=verify-full").unwrap();
        assert_eq!(
            (o.effective_mode(), o.roots.clone()),
            (Mode::VerifyFull, Roots::System)
        );
        assert_eq!(split("postgres://h/db").unwrap().1, TlsOptions::default());
        for bad in [
            "postgres://h/db?sslmode=allow",
            "postgres://h/db?sslcrl=/x",
            "postgres://h/db?sslcert=/x",
            "host=h sslmode='x",
        ] {
            assert_eq!(split(bad).unwrap_err().code(), "INVALID_ARGUMENT", "{bad}");
        }
    }
}
