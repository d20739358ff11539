#!/usr/bin/env python3
"""A real local SMTP server (aiosmtpd) for passkeyd's mail tests: its SMTP client and outbox talk
to this, never to a mock.

Usage: smtp_server.py OUTPUT [options]

On start it makes a throwaway test CA (EC P-256) and a server certificate signed by it for
DNS:localhost and IP:127.0.0.1, and writes the CA certificate (PEM) to OUTPUT.ca.pem. It listens
on 127.0.0.1 only, twice:
  smtp   plain start; offers STARTTLS (unless --no-starttls)
  smtps  implicit TLS: the TLS handshake comes first, then the 220 greeting
Both sockets set SO_REUSEADDR, so a restarted server takes the same ports at once. Once both
listen it writes OUTPUT.port (whole, then renamed) as JSON:
  {"smtp": port, "smtps": port, "ca": "/absolute/path/OUTPUT.ca.pem"}

Every accepted message is appended to OUTPUT as one JSON line (flushed per line):
  {"mail_from": str ("" for the null reverse-path MAIL FROM:<>), "rcpt_tos": [str],
   "data_b64": base64 of the message bytes exactly as received, after dot-unstuffing, up to and
               including the CRLF before the final "." line,
   "tls": bool (STARTTLS or implicit TLS), "auth_user": str or null,
   "mail_options": [str] (MAIL FROM parameters, upper-cased by aiosmtpd, e.g. "SIZE=123",
                   "BODY=8BITMIME", "SMTPUTF8"),
   "rcpt_options": [str] (always [] in practice: aiosmtpd answers any RCPT parameter with 555),
   "listener": "smtp" or "smtps", "time": seconds since the epoch (float)}
Rejected messages (any failure option below) are not written.

Options:
  --smtp-port N / --smtps-port N  ports to listen on (default 0: the system picks)
  --cert-name NAME  the server certificate is for DNS:NAME only (a certificate for another name)
  --self-signed     the server certificate is self-signed, not from the CA (OUTPUT.ca.pem still
                    holds the CA, which then does not verify the server)
  --no-starttls     the smtp listener does not offer STARTTLS (and so never AUTH)
  --auth USER:PASS  AUTH is required before MAIL (530 5.7.0 otherwise); AUTH PLAIN and LOGIN
                    are offered (EHLO "AUTH LOGIN PLAIN") only under TLS; on the plain connection
                    AUTH gets 538 5.7.11; wrong credentials 535 5.7.8; success 235 2.7.0.
                    Without --auth, EHLO offers no AUTH, nothing needs it, and an AUTH command
                    gets 503 5.5.1.
  --smtputf8 / --no-smtputf8  offer SMTPUTF8 (default) or not. Without it, any non-ASCII byte in
                    a command gets "500 Error: strict ASCII mode" and MAIL ... SMTPUTF8 gets 501.
  --rcpt-reply LINE answer every RCPT with LINE (e.g. "550 5.1.1 no such user")
  --data-reply LINE answer the end of every DATA with LINE (e.g. "451 4.3.0 try later")
  --fail-first N    answer the end of DATA of the first N messages (counted over both listeners)
                    with "451 4.3.0 try again later", then accept
  --stall-data      read the whole message after DATA, then never answer the final dot (the
                    connection stays open and silent; nothing is written)
  --stall-greeting  accept connections (and on smtps complete the TLS handshake) and never send
                    the 220 greeting
Precedence at the end of DATA: --stall-data, then --data-reply, then --fail-first.

aiosmtpd behaviour a client meets: greeting "220 localhost Python SMTP 1.4.6"; EHLO lists
SIZE 33554432, 8BITMIME, SMTPUTF8, STARTTLS, AUTH ..., HELP (each when it applies); after
STARTTLS the session is reset and the client must EHLO again (MAIL first gets "503 Error: send
HELO first"); with SMTPUTF8 on, a non-ASCII address is taken even without the SMTPUTF8 MAIL
parameter; a DATA line longer than 1001 bytes with its CRLF (as sent, dot-stuffing included)
gets "500 Line too long" after the final dot; AUTH PLAIN without an initial response gets "334 "
(empty challenge); AUTH LOGIN's challenges are base64 of "User Name\\0" and "Password\\0"; with
--auth, HELO (not EHLO) then AUTH gets 500, and a second AUTH 503. Idle connections close after
300 s (not while stalled). A failed TLS handshake closes the connection (one line on stderr).

Exits 0 on SIGTERM or SIGINT; runs until then. Logs to stderr only briefly.
Needs aiosmtpd and cryptography (pip).
"""

import argparse
import asyncio
import base64
import datetime
import hmac
import ipaddress
import json
import logging
import os
import shutil
import signal
import socket
import ssl
import sys
import tempfile
import threading
import time
import warnings

from aiosmtpd.smtp import SMTP, AuthResult
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def log(message):
    print("smtp_server: " + message, file=sys.stderr, flush=True)


def make_certificates(cert_name, self_signed, folder):
    """Returns (CA PEM, path of the server chain PEM, path of the server key PEM)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=30)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "passkeyd test CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    key = ec.generate_private_key(ec.SECP256R1())
    if cert_name is not None:
        names = [x509.DNSName(cert_name)]
        common_name = cert_name
    else:
        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        common_name = "localhost"
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=False, crl_sign=False,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    if self_signed:
        cert = (
            builder.issuer_name(subject)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
    else:
        cert = (
            builder.issuer_name(ca_name)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
            )
            .sign(ca_key, hashes.SHA256())
        )

    chain_path = os.path.join(folder, "server.pem")
    key_path = os.path.join(folder, "server.key")
    with open(chain_path, "wb") as chain_file:
        chain_file.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as key_file:
        key_file.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    return ca_cert.public_bytes(serialization.Encoding.PEM), chain_path, key_path


class Handler:
    """aiosmtpd hooks: the failure modes, the AUTH check and the output file."""

    def __init__(self, options):
        self.options = options
        self.credentials = None
        if options.auth is not None:
            user, _, password = options.auth.partition(":")
            self.credentials = (user.encode(), password.encode())
        self.failures_left = options.fail_first
        self.lock = threading.Lock()

    def authenticate(self, server, session, envelope, mechanism, auth_data):
        user, password = self.credentials
        login, given = bytes(auth_data.login), bytes(auth_data.password)
        # Both compared, always: no early exit on the user name.
        user_ok = hmac.compare_digest(login, user)
        password_ok = hmac.compare_digest(given, password)
        if user_ok and password_ok:
            return AuthResult(success=True, auth_data=login.decode("utf-8", "replace"))
        return AuthResult(success=False, handled=False)

    async def handle_EHLO(self, server, session, envelope, hostname, responses):
        # With the five-argument hook aiosmtpd leaves the session's host name to us.
        session.host_name = hostname
        if self.credentials is None:
            responses = [line for line in responses if not line.startswith("250-AUTH")]
        return responses

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if self.options.rcpt_reply is not None:
            return self.options.rcpt_reply
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(rcpt_options)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        if self.options.stall_data:
            # Silent for good: no idle timeout either. The client closing the connection
            # cancels this wait.
            if server._timeout_handle is not None:
                server._timeout_handle.cancel()
            await asyncio.get_running_loop().create_future()
        if self.options.data_reply is not None:
            return self.options.data_reply
        if self.failures_left > 0:
            self.failures_left -= 1
            return "451 4.3.0 try again later"
        record = {
            # aiosmtpd keeps the null reverse-path (MAIL FROM:<>) as "<>".
            "mail_from": "" if envelope.mail_from == "<>" else envelope.mail_from,
            "rcpt_tos": list(envelope.rcpt_tos),
            "data_b64": base64.b64encode(envelope.original_content).decode("ascii"),
            "tls": server.under_tls,
            "auth_user": session.auth_data if session.authenticated else None,
            "mail_options": list(envelope.mail_options),
            "rcpt_options": list(envelope.rcpt_options),
            "listener": server.listener,
            "time": time.time(),
        }
        # ensure_ascii (the default) keeps surrogate-escaped bytes of a non-UTF-8 address
        # representable.
        line = json.dumps(record) + "\n"
        with self.lock, open(self.options.output, "a") as output:
            output.write(line)
            output.flush()
        return "250 OK"

    async def handle_exception(self, error):
        # A failed TLS handshake lands here too (the client refused the certificate).
        cause = error.__cause__ or error
        log(f"session error: {type(cause).__name__}: {cause}")
        return f"500 Error: ({type(error).__name__}) {error}"


class Session(SMTP):
    """One connection on one listener."""

    def __init__(self, handler, listener, **kwargs):
        self.listener = listener
        self._auth_enabled = handler.credentials is not None
        super().__init__(handler, **kwargs)

    @property
    def under_tls(self):
        return self.listener == "smtps" or self._tls_protocol is not None

    async def smtp_AUTH(self, arg):
        if not self._auth_enabled:
            await self.push("503 5.5.1 AUTH is not enabled on this server")
            return
        await super().smtp_AUTH(arg)


class Stalled(asyncio.Protocol):
    """Takes the connection and never says anything (--stall-greeting)."""

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        pass


def listening_socket(port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def serve(options, tls_context):
    loop = asyncio.get_running_loop()
    handler = Handler(options)
    auth_required = handler.credentials is not None

    def factory(listener):
        if options.stall_greeting:
            return Stalled
        implicit = listener == "smtps"

        def make():
            return Session(
                handler,
                listener,
                hostname="localhost",
                enable_SMTPUTF8=options.smtputf8,
                tls_context=None if implicit or not options.starttls else tls_context,
                auth_required=auth_required,
                # The whole smtps connection is TLS, which aiosmtpd does not know: it only
                # counts STARTTLS. AUTH on the plain smtp listener stays refused.
                auth_require_tls=not implicit,
                authenticator=handler.authenticate if auth_required else None,
                loop=loop,
            )

        return make

    servers = []
    for listener, port, context in (
        ("smtp", options.smtp_port, None),
        ("smtps", options.smtps_port, tls_context),
    ):
        servers.append(
            await loop.create_server(factory(listener), sock=listening_socket(port), ssl=context)
        )
    ports = [server.sockets[0].getsockname()[1] for server in servers]

    port_path = options.output + ".port"
    with open(port_path + ".part", "w") as port_file:
        json.dump({"smtp": ports[0], "smtps": ports[1], "ca": os.path.abspath(options.output + ".ca.pem")}, port_file)
    os.rename(port_path + ".part", port_path)
    log(f"smtp on 127.0.0.1:{ports[0]}, smtps on 127.0.0.1:{ports[1]}")

    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    for server in servers:
        server.close()


def main():
    parser = argparse.ArgumentParser(description="A local SMTP server for passkeyd's mail tests.")
    parser.add_argument("output")
    parser.add_argument("--smtp-port", type=int, default=0)
    parser.add_argument("--smtps-port", type=int, default=0)
    parser.add_argument("--cert-name")
    parser.add_argument("--self-signed", action="store_true")
    parser.add_argument("--no-starttls", dest="starttls", action="store_false")
    parser.add_argument("--auth", metavar="USER:PASS")
    parser.add_argument("--smtputf8", dest="smtputf8", action="store_true", default=True)
    parser.add_argument("--no-smtputf8", dest="smtputf8", action="store_false")
    parser.add_argument("--rcpt-reply")
    parser.add_argument("--data-reply")
    parser.add_argument("--fail-first", type=int, default=0)
    parser.add_argument("--stall-data", action="store_true")
    parser.add_argument("--stall-greeting", action="store_true")
    options = parser.parse_args()
    if options.auth is not None and ":" not in options.auth:
        parser.error("--auth takes USER:PASS")

    # A test process may start it with SIGTERM blocked (the mask is inherited): stop must work.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
    logging.basicConfig(level=logging.WARNING, format="smtp_server: %(name)s: %(message)s")
    # aiosmtpd logs every command at INFO and warns about settings made on purpose here.
    logging.getLogger("mail.log").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")

    # The key only touches the disk until the TLS context has read it (SIGKILL leaves nothing).
    folder = tempfile.mkdtemp(prefix="passkeyd-smtp-")
    try:
        ca_pem, chain_path, key_path = make_certificates(options.cert_name, options.self_signed, folder)
        tls_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls_context.minimum_version = ssl.TLSVersion.TLSv1_2
        tls_context.load_cert_chain(chain_path, key_path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    with open(options.output + ".ca.pem", "wb") as ca_file:
        ca_file.write(ca_pem)
    asyncio.run(serve(options, tls_context))


if __name__ == "__main__":
    main()
