/// A self-signed certificate for 127.0.0.1 and localhost (P-256, valid until 2126) and its key: what the local
/// push-platform fakes serve TLS with, and what the test clients trust. Made once with
/// `openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 36500 -subj /CN=localhost
/// -addext subjectAltName=DNS:localhost,IP:127.0.0.1`; for tests only.
enum LoopbackCertificate {
  static let certificatePEM = """
    -----BEGIN CERTIFICATE-----
    MIIBmDCCAT6gAwIBAgIUcHDv3ICsc3SIy67MeERfRo8aO4cwCgYIKoZIzj0EAwIw
    FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTEyNDA1NTAzMloYDzIxMjYxMDMx
    MDU1MDMyWjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO
    PQMBBwNCAARdoTCr/0JuuMwpGZz7X1+Aios22Jb6rniq9+nzBXHYzdC/0cDWm1GI
    WCfEZRnvYuv2h8/Rclr8SxPFQihczdESo2wwajAdBgNVHQ4EFgQUKeOD0hQsRoZf
    paeC1SeLq/+YBNwwHwYDVR0jBBgwFoAUKeOD0hQsRoZfpaeC1SeLq/+YBNwwGgYD
    VR0RBBMwEYIJbG9jYWxob3N0hwR/AAABMAwGA1UdEwEB/wQCMAAwCgYIKoZIzj0E
    AwIDSAAwRQIgD1PG5YB9rQFizsj6Sg3tcjlYOYxH7J3ASWi77bW/jxoCIQD8Ms3C
    nKjQbqxdNf3E2KyRxHCVz2YOEJTELWptENOOYg==
    -----END CERTIFICATE-----
    """

  static let privateKeyPEM = """
    -----BEGIN PRIVATE KEY-----
    MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg5N2Er7DQ/eQ4+rvu
    2Cnu3/iXwxsJ/zc9mFj6ppXjqpOhRANCAARdoTCr/0JuuMwpGZz7X1+Aios22Jb6
    rniq9+nzBXHYzdC/0cDWm1GIWCfEZRnvYuv2h8/Rclr8SxPFQihczdES
    -----END PRIVATE KEY-----
    """
}
