"""certs.sync.plan: what goes into the Secret and the caBundle, round after round."""

from datetime import UTC, datetime, timedelta

from cryptography import x509

from certs.sync import PREVIOUS_CA, plan

NOW = datetime(2030, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)


def run(current, now=NOW, ca_days=3650, cert_days=365, renew_days=30):
    return plan(current, "taintkeeper-webhook", "taintkeeper-system", ca_valid_for=ca_days * DAY,
                cert_valid_for=cert_days * DAY, renew_before=renew_days * DAY, now=now)


def subjects(pem_bundle: bytes) -> int:
    return len(x509.load_pem_x509_certificates(pem_bundle))


def test_no_secret_creates_ca_and_serving_pair_and_publishes_the_ca():
    first = run(None)
    assert set(first.secret_data) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    assert first.ca_bundle_pem == first.secret_data["ca.crt"]
    assert (first.result.ca_action, first.result.cert_action) == ("created", "created")


def test_a_valid_secret_is_left_alone():
    first = run(None)
    second = run(first.secret_data, now=NOW + 10 * DAY)
    assert second.secret_data is None
    assert second.ca_bundle_pem == first.secret_data["ca.crt"]


def test_a_serving_cert_close_to_expiry_is_renewed_under_the_same_ca():
    first = run(None)
    renewed = run(first.secret_data, now=NOW + 340 * DAY)
    assert renewed.secret_data is not None
    assert renewed.secret_data["ca.crt"] == first.secret_data["ca.crt"]
    assert renewed.secret_data["tls.crt"] != first.secret_data["tls.crt"]
    assert PREVIOUS_CA not in renewed.secret_data
    assert subjects(renewed.ca_bundle_pem) == 1


def test_a_replaced_ca_stays_trusted_beside_the_new_one_until_it_expires():
    first = run(None, ca_days=60, cert_days=40, renew_days=20)
    rotated = run(first.secret_data, now=NOW + 45 * DAY, ca_days=60, cert_days=40, renew_days=20)
    assert rotated.secret_data["ca.crt"] != first.secret_data["ca.crt"]
    assert rotated.secret_data[PREVIOUS_CA] == first.secret_data["ca.crt"]
    assert subjects(rotated.ca_bundle_pem) == 2
    later = run(rotated.secret_data, now=NOW + 61 * DAY, ca_days=60, cert_days=40, renew_days=20)
    assert PREVIOUS_CA not in (later.secret_data or {})
    assert subjects(later.ca_bundle_pem) == 1
