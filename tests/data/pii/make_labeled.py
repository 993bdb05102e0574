"""Write tests/data/pii/labeled.jsonl: the labeled PII set (positives per type and hard negatives).

Run `.venv/bin/python tests/data/pii/make_labeled.py` to regenerate (seeded, so the output is stable for a
given phonenumbers version). Each line is `{"family": ..., "text": ...}` with gold spans marked as
`⟦type|value⟧` (see corpus_dagster/scrub/evaluate.py). Three kinds of lines:

- hand-written real-shaped examples (contact pages, signatures, logs, configs, forum posts);
- generated positives: random but well-formed values of every format the detectors cover, in varied
  templates (valid phone numbers for 16 regions, Luhn-valid cards per issuer, public/private IPs,
  provider tokens with their real alphabets and lengths);
- hard negatives per family: versions, dates, times, ISBNs, UUIDs, git SHAs, hex hashes, coordinates,
  prices, phone-like ids, documentation addresses, code that looks like addresses, placeholder secrets.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import random
import string
import uuid
from pathlib import Path

import phonenumbers
from phonenumbers import PhoneNumberFormat, PhoneNumberType

OUT = Path(__file__).with_name("labeled.jsonl")
R = random.Random(20240505)
ALNUM = string.ascii_letters + string.digits


def m(kind: str, value: str) -> str:
    """Mark a gold span."""
    return f"⟦{kind}|{value}⟧"


def rand(alphabet: str, n: int) -> str:
    return "".join(R.choice(alphabet) for _ in range(n))


FIRST = "john jane maria li wei ahmed fatima olga pierre jürgen sven akira priya carlos ana tom kate".split()
LAST = "smith doe garcia chen kumar novak dubois müller larsen tanaka patel silva okafor brown".split()
HOSTS = "acme globex initech umbrella-corp hooli stark-industries wayne-ent cyberdyne tyrell soylent".split()
TLDS = "com org net io de co.uk fr edu ca com.au nl jp in com.br es it ch se us info dev ai".split()
PROVIDERS = "gmail.com yahoo.com outlook.com proton.me gmx.de web.de mail.ru qq.com icloud.com aol.com".split()


def email() -> str:
    first, last = R.choice(FIRST), R.choice(LAST)
    local = R.choice(
        [f"{first}.{last}", f"{first}{last}", f"{first[0]}{last}", f"{first}_{last}{R.randint(1, 99)}",
         f"{first}.{last}+{R.choice(['news', 'shop', 'git', 'work'])}", f"{last}-{first}", first,
         f"{first}{R.randint(1970, 2005)}"]
    )
    if R.random() < 0.4:
        domain = R.choice(PROVIDERS)
    else:
        sub = R.choice(["", "", "mail.", "eng.", "cs.", "support."])
        domain = f"{sub}{R.choice(HOSTS)}.{R.choice(TLDS)}"
    return f"{local}@{domain}"


EMAIL_TEMPLATES = [
    "Please contact {} for details.",
    "Send your CV to {} before Friday.",
    "-- \nBest regards,\nMaria\nSenior Engineer\n{}\n",
    'Contact: <a href="mailto:{0}">{0}</a>',
    "From: {}",
    '{{"name": "J. Doe", "email": "{}", "active": true}}',
    "Reported-by: Kate Brown <{}>",
    "Questions? Email us at {}.",
    "id,name,email\n17,Olga Novak,{}\n",
    "I'm at ({}) if you need anything.",
    "Mar 3 10:12:01 mx1 postfix/smtp[2231]: to=<{}>, relay=none, status=sent",
    "Signed-off-by: Sven Larsen <{}>",
    "You can reach the maintainer via {}, or open an issue.",
    "email={}&subscribe=1",
]


def email_lines() -> list[dict]:
    out = []
    for i in range(160):
        tpl = EMAIL_TEMPLATES[i % len(EMAIL_TEMPLATES)]
        addr = email()
        if tpl.startswith("From:"):
            other = f"team@lists.{R.choice(HOSTS)}.{R.choice(TLDS)}"
            text = f"From: {m('emails', addr)} \nTo: {m('emails', other)}\nSubject: meeting notes"
        else:
            text = tpl.format(m("emails", addr))
        out.append({"family": "email.generated", "text": text})
    # obfuscated forms seen in forums and contact pages
    for i in range(40):
        first, last, host, tld = R.choice(FIRST), R.choice(LAST), R.choice(HOSTS), R.choice(["com", "org", "net", "io", "de"])
        forms = [
            f"{first}.{last} [at] {host} [dot] {tld}",
            f"{first}(at){host}.{tld}",
            f"{first} (at) {host} (dot) {tld}",
            f"{first}.{last} AT {host} DOT {tld}",
            f"{first}{{at}}{host}{{dot}}{tld}",
        ]
        form = forms[i % len(forms)]
        text = R.choice(["Drop me a line: {}", "email me at {} (no spam please)", "Contact {} for access.",
                         "write to {} or call"]).format(m("emails", form))
        out.append({"family": "email.obfuscated", "text": text})
    for form in ["email: jane at acme dot io", "E-mail: sven at hooli dot com", "mail me: akira at globex dot de"]:
        key, _, value = form.partition(": ")
        out.append({"family": "email.obfuscated", "text": f"{key}: {m('emails', value)}"})
    return out


PHONE_REGIONS = ["US", "GB", "DE", "FR", "IN", "AU", "JP", "CN", "BR", "ES", "IT", "RU", "ZA", "MX", "NL", "CA"]


def valid_number(region: str, kind: int) -> phonenumbers.PhoneNumber:
    """A random valid number of the region: the example number with randomized trailing digits."""
    base = phonenumbers.example_number_for_type(region, kind) or phonenumbers.example_number(region)
    national = str(base.national_number)
    for _ in range(200):
        tail = "".join(R.choice(string.digits) for _ in range(4))
        cand = phonenumbers.parse(f"+{base.country_code}{national[:-4]}{tail}", None)
        if phonenumbers.is_valid_number(cand):
            return cand
    return base


PHONE_TEMPLATES = [
    "Call us at {}.",
    "Tel: {}",
    "Phone: {} (Mon-Fri 9-5)",
    "Mobile {} | Office hours below",
    "For reservations, dial {} today!",
    "Fax: {}\n",
    "Kontakt: {}",
    "Customer service: {}, or write to us.",
    "If you have questions call me on {} anytime",
    "WhatsApp {}",
]


def phone_lines() -> list[dict]:
    out = []
    for i in range(200):
        region = PHONE_REGIONS[i % len(PHONE_REGIONS)]
        kind = PhoneNumberType.MOBILE if i % 3 == 0 else PhoneNumberType.FIXED_LINE
        num = valid_number(region, kind)
        if region == "US" and i % 2 == 0:
            national = phonenumbers.format_number(num, PhoneNumberFormat.NATIONAL)  # (201) 555-0123
            digits = str(num.national_number)
            value = R.choice([
                national,
                f"{digits[:3]}-{digits[3:6]}-{digits[6:]}",
                f"{digits[:3]}.{digits[3:6]}.{digits[6:]}",
                f"{digits[:3]} {digits[3:6]} {digits[6:]}",
                f"1-{digits[:3]}-{digits[3:6]}-{digits[6:]}",
                f"+1 ({digits[:3]}) {digits[3:6]}-{digits[6:]}",
            ])
        else:
            value = phonenumbers.format_number(num, PhoneNumberFormat.INTERNATIONAL)
            if i % 7 == 0:
                value = phonenumbers.format_number(num, PhoneNumberFormat.E164)
            elif i % 11 == 0:
                value = value.replace(" ", "-")
        text = PHONE_TEMPLATES[i % len(PHONE_TEMPLATES)].format(m("phones", value))
        out.append({"family": "phone.generated", "text": text})
    return out


ISSUERS = [  # (prefixes, length, grouping)
    (["4"], 16, (4, 4, 4, 4)),
    (["51", "52", "53", "54", "55", "2221", "2720", "2500"], 16, (4, 4, 4, 4)),
    (["34", "37"], 15, (4, 6, 5)),
    (["6011", "65", "644"], 16, (4, 4, 4, 4)),
    (["36", "300", "305"], 14, (4, 6, 4)),
    (["3528", "3589"], 16, (4, 4, 4, 4)),
    (["62"], 16, (4, 4, 4, 4)),
    (["4"], 13, None),
]


def luhn_complete(partial: str) -> str:
    """Append the Luhn check digit."""
    total = 0
    for i, ch in enumerate(reversed(partial)):
        d = int(ch)
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return partial + str((10 - total % 10) % 10)


def card_number() -> tuple[str, tuple[int, ...] | None]:
    prefixes, length, grouping = R.choice(ISSUERS)
    prefix = R.choice(prefixes)
    body = prefix + rand(string.digits, length - len(prefix) - 1)
    return luhn_complete(body), grouping


CARD_TEMPLATES = [
    "Card number: {}",
    "charged to my Visa {} yesterday",
    "Please use card {} exp 04/27",
    "CC: {} CVV: 123",
    "payment method {} was declined",
    "My credit card {} was stolen, please block it.",
    "cardNumber={}&amount=10",
]


def card_lines() -> list[dict]:
    out = []
    for i in range(160):
        digits, grouping = card_number()
        style = i % 3 if grouping else 0
        if style == 0:
            value = digits
        else:
            sep = " " if style == 1 else "-"
            parts, pos = [], 0
            for g in grouping:
                parts.append(digits[pos : pos + g])
                pos += g
            value = sep.join(parts)
        out.append({"family": "card.generated", "text": CARD_TEMPLATES[i % len(CARD_TEMPLATES)].format(m("cards", value))})
    return out


def public_v4() -> str:
    while True:
        ip = ipaddress.IPv4Address(R.randint(1 << 24, (224 << 24) - 1))
        if ip.is_global:
            return str(ip)


def private_v4() -> str:
    return R.choice([
        f"10.{R.randint(0, 255)}.{R.randint(0, 255)}.{R.randint(1, 254)}",
        f"192.168.{R.randint(0, 255)}.{R.randint(1, 254)}",
        f"172.{R.randint(16, 31)}.{R.randint(0, 255)}.{R.randint(1, 254)}",
    ])


def public_v6() -> str:
    while True:
        ip = ipaddress.IPv6Address((0x2 << 124) | R.getrandbits(124))
        if ip.is_global:
            text = ip.compressed if R.random() < 0.5 else ip.exploded
            return text


IP_TEMPLATES = [
    "Failed password for root from {} port 22 ssh2",
    '{} - - [10/Oct/2023:13:55:36 +0000] "GET /index.html HTTP/1.1" 200 2326',
    "X-Forwarded-For: {}",
    "ping {} and check the latency",
    "server listening on {}:8080",
    "The attacker's address was {}.",
    "nameserver {}",
    "allow from {}",
    "Connection from {} closed",
    "curl http://{}/api/health",
]


def ip_lines() -> list[dict]:
    out = []
    for i in range(200):
        kind = i % 5
        value = public_v6() if kind == 4 else (private_v4() if kind == 3 else public_v4())
        tpl = IP_TEMPLATES[i % len(IP_TEMPLATES)]
        if ":" in value and tpl.startswith("curl"):
            tpl = "curl http://[{}]/api/health"
        if ":" in value and "{}:8080" in tpl:
            tpl = "server listening on [{}]:8080"
        out.append({"family": "ip.generated", "text": tpl.format(m("ips", value))})
    for v in ["fe80::1ff:fe23:4567:890a%eth0", "fd12:3456:789a:1::1", "::ffff:93.184.216.34", "2a00:1450:4001:82a::200e"]:
        out.append({"family": "ip.v6_forms", "text": f"inet6 {m('ips', v)} scope global"})
    return out


def b64url(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def jwt() -> str:
    head = b64url({"alg": R.choice(["HS256", "RS256"]), "typ": "JWT"})
    body = b64url({"sub": str(R.randint(10**8, 10**9)), "name": R.choice(FIRST), "iat": R.randint(1.5e9, 1.7e9)})
    return f"{head}.{body}.{rand(ALNUM + '-_', 43)}"


def pem(kind: str) -> str:
    lines = [rand(ALNUM + "+/", 64) for _ in range(R.randint(3, 8))]
    return f"-----BEGIN {kind}PRIVATE KEY-----\n" + "\n".join(lines) + f"\n-----END {kind}PRIVATE KEY-----"


def key_values() -> list[tuple[str, str]]:
    """(template, secret) pairs: the secret is the marked part."""
    upper_b32 = string.ascii_uppercase + "234567"
    return [
        ("aws_access_key_id = {}", R.choice(["AKIA", "ASIA"]) + rand(upper_b32, 16)),
        ("export AWS_SECRET_ACCESS_KEY={}", rand(ALNUM + "+/", 40)),
        ("git clone https://{}@github.com/acme/private.git", "ghp_" + rand(ALNUM, 36)),
        ("GITHUB_TOKEN: {}", "github_pat_" + rand(ALNUM + "_", 82)),
        ("token = '{}'", "glpat-" + rand(ALNUM + "-_", 20)),
        ("SLACK_BOT_TOKEN={}", f"xoxb-{rand(string.digits, 12)}-{rand(string.digits, 13)}-{rand(ALNUM, 24)}"),
        ("webhook: https://{}", "hooks.slack.com/services/T" + rand(upper_b32, 8) + "/B" + rand(upper_b32, 10)
         + "/" + rand(ALNUM, 24)),
        ("stripe.api_key = \"{}\"", "sk_live_" + rand(ALNUM, 24)),
        ("const key = '{}';", "AIza" + rand(ALNUM + "-_", 35)),
        ("OPENAI_API_KEY={}", "sk-" + rand(ALNUM, 20) + "T3BlbkFJ" + rand(ALNUM, 20)),
        ("openai.api_key = \"{}\"", "sk-proj-" + rand(ALNUM + "-_", 74) + "T3BlbkFJ" + rand(ALNUM + "-_", 74)),
        ("Authorization: Bearer {}", jwt()),
        ("session cookie: {}", jwt()),
        ("{}", pem("RSA ")),
        ("{}", pem("OPENSSH ")),
        ("{}", pem("EC ")),
        ("{}", pem("")),
        ("DB_PASSWORD={}", rand(ALNUM + "!#%^*", 16)),
        ("password: \"{}\"", rand(ALNUM, 12)),
        ("  api_key: {}", rand(string.hexdigits.lower()[:16], 32)),
        ('"client_secret": "{}",', rand(ALNUM + "-_", 40)),
        ("mysql -u root --password={} mydb", rand(ALNUM, 14)),
    ]


def key_lines() -> list[dict]:
    out = []
    for _ in range(9):
        for tpl, secret in key_values():
            out.append({"family": "key.generated", "text": tpl.format(m("keys", secret))})
    return out


REAL_SHAPED = [
    f"Thanks for the help! You can reach me at {m('emails', 'priya.patel@cs.stanford.edu')} or on my cell "
    f"{m('phones', '(650) 723-2300')}.",
    f"Contact Us\nPhone: {m('phones', '+44 20 7946 0321')}\nEmail: {m('emails', 'info@tyrell-corp.co.uk')}\n"
    "Address: 1 Canada Square, London",
    f"Dec 12 03:14:07 web01 sshd[1123]: Invalid user admin from {m('ips', '61.177.172.13')} port 40112",
    f"[mysqld]\nbind-address = {m('ips', '10.0.3.17')}\nuser = mysql\npassword = {m('keys', 'Xk9#pQ2!vL7zR4')}",
    f"PGPASSWORD={m('keys', 'c8Fj2LmQ9xTz4WbV')} psql -h {m('ips', '172.31.5.20')} -U app",
    f"Hi all, I'm selling my old laptop. DM me or text {m('phones', '415-555-2671')}. Cash only.",
    f"Impressum: Tel. {m('phones', '+49 30 12345678')}, E-Mail: {m('emails', 'kontakt@beispiel-gmbh.de')}",
    f"my card {m('cards', '4539 1488 0343 6467')} got charged twice, can someone help??",
    f"Réservations au {m('phones', '+33 1 42 68 53 00')} ou par courriel {m('emails', 'resa@hotel-lutece.fr')}",
    f"git remote set-url origin https://{m('keys', 'ghp_Hn3x8Wq2LmZ9vB4tK7yR1cF6pD0sJ5aE2uG8')}@github.com/x/y",
    f"upstream backend {{ server {m('ips', '203.0.114.9')}:443; server {m('ips', '198.51.99.2')}:443; }}",
    f"Call {m('phones', '1-800-275-2273')} for Apple support or visit the store.",
    f"Our office: {m('phones', '+81 3-1234-5678')} (Tokyo), {m('phones', '+86 10 6552 9988')} (Beijing)",
    f"Forwarded message from {m('emails', 'ahmed.okafor@globex.ng')} on Tue",
    f"ssh -i ~/.ssh/id_rsa deploy@{m('ips', '52.14.200.7')}",
    f"HOST={m('ips', '2a03:2880:f12f:83:face:b00c:0:25de')}",
    f'<a href="tel:{m("phones", "+12025550143")}">Call us</a>',
    f"Office {m('phones', '+1.202.555.0143')}, cell {m('phones', '(202)555-0199')}, fax {m('phones', '202/555-0111')}",
    '{"type": "service_account", "private_key": "'
    + m("keys", "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj"
        "\\nMzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\\n-----END PRIVATE KEY-----")
    + '\\n", "client_email": "' + m("emails", "svc-reporting@acme-prod-4411.iam.gserviceaccount.com") + '"}',
    "DefaultEndpointsProtocol=https;AccountName=acmestore;AccountKey="
    + m("keys", "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==")
    + ";EndpointSuffix=core.windows.net",
    f"curl -H 'Authorization: token {m('keys', 'ghp_R8s2Lq0VbX7mN4tY9wK3cJ6pF1zD5hA0uE2g')}' https://api.github.com/user",
    f"Authorization: Basic {m('keys', 'YWxpY2U6czNjcjN0LXBhc3M=')}",
    f"Reply to {m('emails', 'John.Doe@ACME.COM')} or {m('emails', '12345678@qq.com')}",
    f"route add {m('ips', '52.94.76.10')}/32 via gateway",
    f"Tel {m('phones', '202-555-0143')} {m('phones', '202-555-0199')} (office / mobile)",
    f"phones: {m('phones', '+1 202 555 0143')} {m('phones', '+1 202 555 0199')}",
    f"Copyright: <2005> Thomas Vander Stichele <{m('emails', 'thomas at apestaart dot org')}>",
]

# National formats of regions other than the default (US) count after a phone cue (pii.phones.regions).
FOREIGN_NATIONAL = [
    f"Ring us on {m('phones', '020 7946 0958')} (London office)",
    f"Telefon: {m('phones', '030 12345678')}",
    f"Appelez le {m('phones', '01 42 68 53 00')}",
    f"Tel: {m('phones', '0415 645 206')}",
    f"For bookings call {m('phones', '030 632606')} between 9 and 5.",
    f"Natel / Tel. {m('phones', '078 158 83 24')}",
    f"Tel.: {m('phones', '02033 12 5219')} (Zentrale)",
    f"Freecall: call {m('phones', '1800 176 369')} from anywhere in Australia.",
]
# Japan is not in the default pii.phones.regions and the cue is not a word the cue list knows: an honest miss.
UNCOVERED_REGION = [f"電話: {m('phones', '03-1234-5678')}"]


NEGATIVES: dict[str, list[str]] = {
    "versions": [
        "Python 3.11.4 was released", "version 1.2.3.4 of the driver", "v2.10.0.1", "upgraded to 4.3.2.1 last week",
        "release 10.0.19041.1", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/120.0.6099.109 Safari/537.36",
        "gcc 13.2.0", "1.2.3.4-beta", "libfoo.so.1.2.3", "numpy==1.26.4", "Build 8.1.7601.24544",
        "firmware 2.4.11.3", "see section 2.3.1.4 of the spec", "Table 3.2.1.5 lists the values",
        "kernel 5.15.0.91", "OID 1.3.6.1.4.1.2021", "the 4.19.0.0 tag", "Version: 11.2.0.4.0",
        "(since dpkg 1.15.5.4)", "Requires-Dist: fasttext-predict>=0.9.2.4", "brotlicffi>=1.2.0.2",
        "for mv_conffile it is 1.15.7.2", "for examples see Section\\ 7.8.2.2 of the manual",
    ],
    "dates": [
        "2023-01-15", "15.01.2023", "01/15/2023", "2023-01-15 12:30:45", "Jan 15, 2023", "20230115",
        "2023/01/15", "on 1999-12-31 at 23:59", "2024-02-29T08:15:00Z", "Between 2001-2005 and 2010-2015",
        "born 12.03.1985 in Berlin", "05-06-2007", "1 Jan 2024 - 31 Dec 2024",
    ],
    "times": ["12:30:45", "T12:30:45Z", "12:30:45.123", "at 09:15 and 17:45", "duration 01:02:03:04"],
    "isbns": [
        "ISBN 978-3-16-148410-0", "ISBN-10: 0-306-40615-2", "ISBN 0306406152", "978-0-306-40615-7",
        "ISBN 978 0 306 40615 7", "ISBN-13: 9780306406157", "ISSN 0317-8471", "ISBN 1-56619-909-3",
    ],
    "uuids": [str(uuid.UUID(int=R.getrandbits(128), version=4)) for _ in range(15)],
    "git_shas": [f"commit {rand('0123456789abcdef', 40)}" for _ in range(8)]
    + [f"fixed in {rand('0123456789abcdef', 7)}" for _ in range(4)],
    "hex_hashes": [f"md5: {rand('0123456789abcdef', 32)}" for _ in range(5)]
    + [f"sha256:{rand('0123456789abcdef', 64)}" for _ in range(5)]
    + [f"SHA1 {rand('0123456789ABCDEF', 40)}" for _ in range(3)],
    "coordinates": [
        "40.7128° N, 74.0060° W", "40.7128, -74.0060", "lat=51.5074, lon=-0.1278", "(48.8566, 2.3522)",
        "35.6762 139.6503", "-33.8688, 151.2093", "GPS 52.520008 13.404954",
    ],
    "prices": [
        "$1,299.99", "€1.234.567,89", "USD 12,345,678", "1 234 567 €", "¥123456789", "£ 2 500 000",
        "total: 1.234.567.890 VND", "$4,111,111,111,111.00", "price 12 345 678 90 RUB",
    ],
    "phone_like_ids": [
        "Order number: 415-555-2671", "Ticket 212-736-5000", "Invoice #800-275-2273", "SKU 650-253-0000",
        "Case No. 2:19-cv-01234", "Patent US 7,654,321", "tracking 1Z999AA10123456784", "ISSN 2049-3630",
        "part no. 0-8044-2957-X", "DOI 10.1000/182", "IMEI 35-209900-176148-1", "EAN 4006381333931",
        "ID 2025550143", "call id 4829103822", "2025550143", "ref 202 555 0143", "order 4111111111111111",
        "account 123-456-7890", "PMID 31452104", "arXiv:2106.09685", "serial 12-3456-7890-12",
        "IBAN DE89 3704 0044 0532 0130 00", "routing 021000021", "tracking number 9400 1000 0000 0000 0000 00",
        "Restricted Rights as defined in Clause 252.227-7013 (c) (1) of DFARs", "see 17 U.S.C. \u00a7 512-1234",
    ],
    "numbers": [
        "1234567", "population 8 336 817", "1,234,567,890", "3.14159265358979", "pi = 3.1415926535",
        "1000000 2000000 3000000", "port 8080 9090 10000", "0.1 0.2 0.3 0.4 0.5 0.6 0.7",
        "timestamp 1700000000000", "id=17000000000001234", "22 33 44 55", "epoch 1699999999",
        "4111 1111 1111 1112", "1234 5678 9012 3456", "49 927 398 716", "a 13-digit 1234567890123 value",
        "1 2 3 4 5 6 7 8 9 10", "Sizes: 32 34 36 38 40 42 44", "winning numbers 04 11 23 35 42 49",
        "page 212 313 414 515", "3 1 4 1 5 9 2 6 5 3 5 8 9", "10 20 30 40 50 60 70 80",
        "0 83 skipped 0 1412881037 914578 5217\n0 83 4722 0 1412881037 914578 5099",
        "100644 blob 0000000 1234567 2025550143 3035550188", "1024-65011712",
    ],
    "example_domains": [
        "user@example.com", "alice@example.org", "bob@mail.example.net", "admin@localhost", "user@host.test",
        "you@domain.invalid", "Write to postmaster@example.com for help.", "jane.doe@sub.example.org",
        "mailto:nobody@example.net", "dev@server.local", "root@localhost.localdomain",
    ],
    "email_like_code": [
        "@property\ndef name(self):", "npm install react@18.2.0", "logo@2x.png", "icon@3x.jpg",
        "@types/node@20.1.0", "foo@bar", "git log --author=@me", "def f(): return a@b", "@media (max-width: 600px)",
        "matrix A@B in numpy", "user@server", "look at google.com for details", "worked at Pets dot com in 1999",
        "the dot com bubble", "stared at the dot com crash", "meet me at noon dot", "x = y @ z.T",
    ],
    "ip_negatives": [
        "127.0.0.1", "localhost 127.0.1.1", "192.0.2.10", "198.51.100.23", "203.0.113.7", "255.255.255.0",
        "netmask 255.255.240.0", "0.0.0.0", "10.0.0.0/8", "192.168.0.0/16", "::1", "std::vector<int>",
        "a::b", "x[10::2]", "00:1A:2B:3C:4D:5E", "2001:db8::1", "fe80::/10", "224.0.0.251 (mDNS)",
        "1.2.3.4.5", "999.1.1.1", "01.02.03.04", "Rust Vec::<u8>::new()", "ff02::1",
    ],
    "key_negatives": [
        "password: ********", "password = 'hunter2'", "api_key = os.environ['API_KEY']",
        "tokens = tokenizer.encode(text)", "API_KEY=your-api-key-here", "SECRET_KEY = '<your secret key>'",
        "AKIAIOSFODNN7EXAMPLE", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "-----BEGIN PRIVATE KEY-----\n...\n-----END PRIVATE KEY-----",
        "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEVs/o5+uQbTjL3chynL4wXgUg2R9\n"
        "-----END PUBLIC KEY-----",
        "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7 user@host", "pip install scikit-learn  # sk-learn",
        "pk_live_51HqLyjWDarjtT1zdp7dc", "max_tokens: 4096", "num_tokens = 50256", "token_type: bearer",
        "password_reset_url: https://acme.io/reset", "Authorization: Bearer $TOKEN", "Bearer <token>",
        "token: null", "secret = None", "password=${DB_PASSWORD}", "password: {{ vault_password }}",
        "auth_token = get_token()", "the author: Jonathan Swift", "passwords must be 8+ characters",
        "eyJhbGciOi.not.a.jwt", "git_sha: 9fceb02d0ae598e95dc970b74767f19372d61af8", "secret_santa: true",
        "token_hash: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "credentials: self.credentials", "password = settings.DB_PASSWORD", "sk-some-long-package-name-here-too",
        # placeholders and resource names from real CLI docs (gcloud, systemd man pages)
        "--mysql-password=MYSQL_PASSWORD\\ --mysql-secret-manager-stored-password=STORED_PASSWORD\\",
        "--secret=projects/my-project/secrets/my-secret/versions/2", "--pvk-password=my-pvk-password",
        "--root-password=password123", "SECRET_ENV_VAR=SECRET_VALUE_REF.", "Token=static:::1a:2b:3c:4d",
        "--set-credential=passwd.hashed-password.root:\\*", "hostname:port:username:password:base_dn:flags",
        "--salesforce-oauth2-client-secret=SALESFORCE_OAUTH2_CLIENT_SECRET", "oauth2-client-secret=OAUTH2-CLIENT-SECRET",
        "LoadCredential=/SetCredential=", "-ref 1234 -secret pass:1234-5678",
    ],
    "placeholders": ["Mail <EMAIL> or call <PHONE>.", "from <IP> with key <KEY> and card <CARD>", "password=<KEY>"],
}


def negative_lines() -> list[dict]:
    out = []
    for family, items in NEGATIVES.items():
        for item in items:
            out.append({"family": f"neg.{family}", "text": item})
    return out


# ------------------------------------------------------------------------------------------------------------
# Grown for issue 13: cued national numbers of other regions, payment cues over id cues, cued short secrets,
# and the hard negatives next to them. A separate seed keeps every line above unchanged.

R2 = random.Random(1313)
CUED_REGIONS = {  # region: cue phrases in the region's languages, in prose
    "GB": ["Call us on {}.", "Tel: {} (reception)", "Ring {} to book a table.", "Mobile: {}"],
    "AU": ["Call {} for a quote.", "Ph: {}", "Mob {} - after hours only", "Contact our office on tel. {}"],
    "IN": ["Mob: {}", "Call {} for admissions.", "Ph. {} (10 am to 6 pm)", "Contact: {}"],
    "CA": ["Tel.: {}", "Call {} toll-free.", "Téléphone : {}", "Phone {} ext. 2"],
    "NZ": ["Phone {} or email us.", "Call {} to register."],
    "IE": ["Tel: {}", "Call the clinic on {}."],
    "ZA": ["Tel: {}", "Call {} for bookings."],
    "NG": ["Call {} for enquiries.", "Tel: {}"],
    "PH": ["Call {} for reservations.", "Mobile: {}"],
    "MX": ["Teléfono: {}", "Llame al {} para más información.", "Tel. {} de lunes a viernes", "WhatsApp {}"],
    "ES": ["Teléfono: {}", "Llámenos al {}.", "Tel.: {} (horario de oficina)", "Móvil {}"],
    "AR": ["Tel: {}", "Teléfono {} (consultas)"],
    "CO": ["Teléfono: {}", "Celular {}"],
    "FR": ["Tél. : {}", "Appelez le {} du lundi au vendredi.", "Téléphone : {}", "Portable {}"],
    "BE": ["Tél. : {}", "Tel. {} (secretariaat)"],
    "CH": ["Tel. {}", "Telefon {} (Praxis)", "Handy {}", "Téléphone : {}"],
    "DE": ["Telefon: {}", "Tel.: {} (Zentrale)", "Rufen Sie uns an: {}", "Handy {}", "Fax: {}"],
    "AT": ["Tel.: {}", "Telefon {} (Mo-Fr)"],
    "BR": ["Telefone: {}", "Ligue {} para agendar.", "Tel.: {}", "Celular {}", "WhatsApp: {}"],
    "PT": ["Telefone: {}", "Contacto: {}", "Ligue para {}."],
}


def r2_digits(n: int) -> str:
    return "".join(R2.choice(string.digits) for _ in range(n))


def r2_number(region: str, kind: int) -> phonenumbers.PhoneNumber:
    """A random valid number of the region (the example number with randomized trailing digits)."""
    base = phonenumbers.example_number_for_type(region, kind) or phonenumbers.example_number(region)
    national = str(base.national_number)
    for _ in range(200):
        cand = phonenumbers.parse(f"+{base.country_code}{national[:-4]}{r2_digits(4)}", None)
        if phonenumbers.is_valid_number(cand):
            return cand
    return base


def cued_national_lines() -> list[dict]:
    out = []
    for i in range(8):
        for region, templates in CUED_REGIONS.items():
            num = r2_number(region, PhoneNumberType.MOBILE if i % 2 else PhoneNumberType.FIXED_LINE)
            value = phonenumbers.format_number(num, PhoneNumberFormat.NATIONAL)
            if i % 4 == 3:  # people regroup: spaces instead of the official separators
                value = value.replace("-", " ").replace("(", "").replace(")", "")
            if not phonenumbers.is_valid_number_for_region(phonenumbers.parse(value, region), region):
                continue  # the national form alone does not say the number (a few metadata quirks)
            out.append({"family": "phone.national_cued",
                        "text": templates[i % len(templates)].format(m("phones", value))})
    return out


def r2_card() -> str:
    prefixes, length, _ = R2.choice(ISSUERS[:7])
    prefix = R2.choice(prefixes)
    return luhn_complete(prefix + r2_digits(length - len(prefix) - 1))


CUED_CARD_TEMPLATES = [
    "CC#{} exp 08/26",
    "CC# {} (Visa)",
    "Refund the amount to {} please, the order was cancelled.",
    "Please refund the amount to {} as agreed.",
    "Order #4471 - paid by card {}",
    "Invoice 2291: charged to {} on 3 May",
    "billing: {}",
    "Kreditkarte {} gültig bis 09/27",
    "Tarjeta de crédito: {}",
    "carte bancaire n° {}",
]


def cued_card_lines() -> list[dict]:
    out = []
    for i in range(60):
        value = r2_card()
        out.append({"family": "card.cued", "text": CUED_CARD_TEMPLATES[i % len(CUED_CARD_TEMPLATES)].format(
            m("cards", value))})
    return out


def r2_secret(n: int, alphabet: str = ALNUM + "!#%&*@^") -> str:
    while True:
        value = "".join(R2.choice(alphabet) for _ in range(n))
        if any(c.isdigit() for c in value) and any(c.isupper() for c in value) and any(c.islower() for c in value):
            return value


WORDS = "correct horse battery staple orange river quiet mountain seven lantern copper violet".split()
CUED_KEY_TEMPLATES = [
    'gpg --batch --passphrase "{}" -d backup.tar.gpg',
    "The passphrase is '{}' - do not share it.",
    'Use the passphrase "{}" to unlock the vault.',
    'mysql -u admin --password "{}" -h db01',
    'Set the Wi-Fi password "{}" on the guest network.',
    "the admin password is '{}' until we rotate it",
    "secret key: {}",
    'Secret key "{}" was pasted in the ticket.',
    "secret_key={}",
    "password={}",
    "PASSWORD: {}",
    "pwd={}",
]


def cued_key_lines() -> list[dict]:
    out = []
    for i in range(72):
        tpl = CUED_KEY_TEMPLATES[i % len(CUED_KEY_TEMPLATES)]
        if "passphrase" in tpl.lower():
            value = R2.choice([" ".join(R2.sample(WORDS, 4)), "-".join(R2.sample(WORDS, 3)), r2_secret(10)])
        else:
            value = r2_secret(R2.randint(6, 9))
        out.append({"family": "key.cued", "text": tpl.format(m("keys", value))})
    return out


GROWN_NEGATIVES: dict[str, list[str]] = {
    "test_cards": [
        "For testing use 4111 1111 1111 1111 with any future date.",
        "In test mode, use the card number 4242 4242 4242 4242 with any CVC.",
        "Stripe's test card 4000 0566 5566 5556 is a Visa debit card.",
        "Use 5555 5555 5555 4444 (Mastercard) or 378282246310005 (Amex) in the sandbox.",
        "Braintree accepts 4111111111111111 and 5105105105105100 as valid test numbers.",
        "JCB test number: 3530111333300000; Diners: 30569309025904.",
        "Discover test card 6011111111111117 will always be approved.",
        "The test Visa 4012888888881881 returns a successful charge.",
        "Refund the amount to 4242424242424242 (test card) to see the refund webhook.",
        "CC# 4111111111111111 is the canonical test number in payment docs.",
    ],
    "cued_non_phones": [
        "Call us between 09:00 - 17:30 on weekdays.",
        "Call for papers: deadline 2024-03-15, notification 2024-05-01.",
        "Phone orders ship in 3 - 5 business days.",
        "Telefon: siehe Seite 12 - 14 im Handbuch.",
        "Call the function 10 000 times in a loop.",
        "WhatsApp version 2.23.24.82 for Android is out.",
        "Téléphone portable 5 G, 128 Go, écran 6,1 pouces.",
        "Mobile app build 1.4.2 (2024-02-01) fixes the crash.",
        "Call of Duty 4 was released 2007 11 05 in Europe.",
        "Teléfono: catálogo 2023 - 2024, página 45.",
        "Call the ISBN 978-3-16-148410-0 edition from the library.",
        "contact angle 112.5 - 118.0 degrees",
        "call sign DL 1234 567",
        "Tel: siehe oben, Fax: 15.03.2024",
        "call 0.1 0.2 0.3 0.4 0.5 in sequence",
        "Dial 3 1 4 1 5 9 2 6 5 3 5 to unlock the level.",
        "Call order 0415 645 206 shipped today.",
        "call id 030 632606 in the trace",
        "Ring size 52 54 56 58 60 available",
        "mobile uuid 3f2b9c1e-8d4a-4b7e-9f01-2c6d8e5a7b34",
        "call sha 9fceb02d0ae598e95dc970b74767f19372d61af8",
        "contact 192.0.2.44 or 198.51.100.7 for the test network",
    ],
    "cued_non_secrets": [
        'Enter your password "twice" to confirm.',
        'password "********" (hidden)',
        "the default password 'changeme' must be replaced",
        "password 'hunter2' is the classic joke",
        'Set password "" to disable authentication.',
        'The field labeled "Password" is required.',
        'passphrase "your passphrase here"',
        'password: "${DB_PASS}"',
        'secret key "<your key>"',
        "secret key: SECRET_KEY",
        'password "password"',
        "the secret key is 'sk_test_...' in the example",
        'pass phrase "example phrase"',
        "password=MyPassword",
        "secret_key=settings.SECRET_KEY",
        'password "${PASSWORD}" from the environment',
        'the password "admin" is rejected by the policy',
        "password: 'xxxxxx'",
    ],
}


def grown_lines() -> list[dict]:
    out = cued_national_lines() + cued_card_lines() + cued_key_lines()
    for family, items in GROWN_NEGATIVES.items():
        out.extend({"family": f"neg.{family}", "text": t} for t in items)
    return out


# Cued national numbers in the phrasings prose uses around a number (`our office number is`, `reach us on`,
# `dial`, `direct line`), for the regions of the default pii.phones.regions, with hard negatives that
# share the words. Its own seed keeps every line above unchanged.

R3 = random.Random(2026)
CUE_PHRASES = [
    "Our office number is {}.", "You can reach us on {} during office hours.", "Dial {} for support.",
    "For support, contact us at {}.", "Home number: {}", "Our main number is {} (press 2 for sales).",
    "Direct line {}", "call {} for support", "Please phone {} to book.", "Customer service line: {}",
    "Reach me on {} after 6 pm.", "Our support line is {}",
]
CUE_PHRASE_REGIONS = ["GB", "AU", "IN", "NZ", "IE", "ZA", "FR", "DE", "ES", "MX", "BR", "CH"]
CUE_PHRASE_NEGATIVES = [
    "Our office number is 12 on the third floor.", "The number of units is 1 234 567 in 2024.",
    "direct line of sight 1200 - 1500 m", "Main number of the series: 3.14159 2.71828",
    "Home number 7 of 12 in the street survey", "Call stack depth 0 1 2 3 4 5",
    "customer service line items 2023 - 2024", "office no. 4711-2024-03",
    "You can reach version 2.4.11.3 on the mirror.", "Dial 1 2 3 4 5 6 7 8 to reset.",
]


def cue_phrase_lines() -> list[dict]:
    out = []
    for i in range(120):
        region = CUE_PHRASE_REGIONS[i % len(CUE_PHRASE_REGIONS)]
        base = phonenumbers.example_number_for_type(region, PhoneNumberType.MOBILE if i % 2 else
                                                    PhoneNumberType.FIXED_LINE) or phonenumbers.example_number(region)
        national = str(base.national_number)
        num = base
        for _ in range(200):
            cand = phonenumbers.parse(f"+{base.country_code}{national[:-4]}"
                                      + "".join(R3.choice(string.digits) for _ in range(4)), None)
            if phonenumbers.is_valid_number(cand):
                num = cand
                break
        value = phonenumbers.format_number(num, PhoneNumberFormat.NATIONAL)
        if not phonenumbers.is_valid_number_for_region(phonenumbers.parse(value, region), region):
            continue
        out.append({"family": "phone.national_cue_phrases",
                    "text": CUE_PHRASES[(i // len(CUE_PHRASE_REGIONS) + i) % len(CUE_PHRASES)].format(
                        m("phones", value))})
    out += [{"family": "neg.cue_phrase_non_phones", "text": t} for t in CUE_PHRASE_NEGATIVES]
    return out


def main() -> None:
    lines = (
        email_lines() + phone_lines() + card_lines() + ip_lines() + key_lines()
        + [{"family": "real_shaped", "text": t} for t in REAL_SHAPED]
        + [{"family": "phone.foreign_national", "text": t} for t in FOREIGN_NATIONAL] + negative_lines()
        + [{"family": "phone.uncovered_region", "text": t} for t in UNCOVERED_REGION]
        + grown_lines() + cue_phrase_lines()
    )
    with open(OUT, "w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")
    print(f"wrote {len(lines)} lines to {OUT}")


if __name__ == "__main__":
    main()
