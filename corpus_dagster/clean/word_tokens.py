"""spaCy's English tokenizer rules for one whitespace-free chunk, without spaCy.

datatrove splits English into words with `spacy.blank("en")`. Per chunk it peels prefix and suffix
punctuation one piece at a time, keeps special cases (contractions, abbreviations, emoticons) and URLs
whole, and splits the rest at infixes (hyphen between letters, `/` `:` `=` `<` `>` before a letter,
`,` between letters, `lower.Upper`, ellipses, symbols). The rules here are written from spaCy's
documented prefix/suffix/infix classes; the special-case list is a compact one of our own.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import regex

# ---------------------------------------------------------------- character classes

_PUNCT = "…,:;!?¿؟¡()[]{}<>_#*&。？！，、；：～·।،۔؛٪"
_QUOTES = "'\"”“`‘´’‚,„»«「」『』（）〔〕【】《》〈〉⟦⟧"
_CURRENCY = ["US$", "C$", "A$", "$", "£", "€", "¥", "฿", "₽", "﷼", "₴", "₠", "₡", "₢", "₣", "₤", "₥", "₦", "₧",
             "₨", "₩", "₪", "₫", "₭", "₮", "₯", "₰", "₱", "₲", "₳", "₵", "₶", "₷", "₸", "₹", "₺", "₻", "₼",
             "₾", "₿"]
_UNITS = ("km km² km³ m m² m³ dm dm² dm³ cm cm² cm³ mm mm² mm³ ha µm nm yd in ft kg g mg µg t lb oz m/s km/h "
          "kmh mph hPa Pa mbar mb MB kb KB gb GB tb TB T G M K % км км² км³ м м² м³ дм дм² дм³ см см² см³ мм "
          "мм² мм³ нм кг г мг м/с км/ч кПа Па мбар Кб КБ кб Мб МБ мб Гб ГБ гб Тб ТБ тб").split()
_LOWER = r"\p{Ll}\p{Lo}"  # spaCy counts letters without case as both lower and upper
_UPPER = r"\p{Lu}\p{Lo}"


PREFIX_CHARS = frozenset("§%=—–" + _PUNCT + _QUOTES) | frozenset(c for c in _CURRENCY if len(c) == 1)
SUFFIX_CHARS = frozenset(_PUNCT + _QUOTES + "—–")
MULTI_CURRENCY = ("US$", "C$", "A$")
_DOT_AFTER = frozenset("%²-+" + _PUNCT + _QUOTES)  # `.` after these (or a digit / lower-case letter) is a suffix
SUFFIX_UNITS = frozenset(_UNITS) | frozenset(_CURRENCY)  # split off after a digit
_MAX_UNIT = max(map(len, SUFFIX_UNITS))
_INFIX_RE = regex.compile("|".join([
    r"\.\.+", "…", r"\p{So}", r"(?<=[0-9])[+\-\*^](?=[0-9-])",
    r"(?<=[" + _LOWER + regex.escape(_QUOTES) + r"])\.(?=[" + _UPPER + regex.escape(_QUOTES) + "])",
    r"(?<=\p{L}),(?=\p{L})", r"(?<=[\p{L}0-9])(?:-|–|—|--|---|——|~)(?=\p{L})",
    r"(?<=[\p{L}0-9])[:<>=/](?=\p{L})",
]))


def class_chars(chars: str | frozenset[str] | set[str]) -> str:
    """`chars` as the inside of a `[...]` class that both Python's `regex` and Rust's `regex` (polars) read."""
    return "".join("\\" + c if c in "\\]^-[&~|" else c for c in sorted(set(chars)))


# Where an infix *could* split, without look-arounds (polars' regex has none): a chunk with no match here
# has no infix match after its first character. It matches a superset (e.g. `..` at the very start).
INFIX_ANYWHERE = "|".join([
    r"\.\.", "…", r"\p{So}", r"[0-9][+\-*^][0-9-]",
    rf"[{_LOWER}{class_chars(_QUOTES)}]\.[{_UPPER}{class_chars(_QUOTES)}]",
    r"\p{L},\p{L}", r"[\p{L}0-9](?:-|–|—|--|---|——|~)\p{L}", r"[\p{L}0-9][:<>=/]\p{L}",
])
_INFIX_TRIGGER = regex.compile(r"[.…,\-–—~:<>=/+*^\p{So}]")
# URLs and e-mail addresses stay one token (a simplified form of spaCy's URL pattern).
_URL_RE = regex.compile(
    r"^(?:[\w+\-.]{2,}://)?(?:\S+(?::\S*)?@)?(?:(?:[\w\u00a1-\uffff][\w\u00a1-\uffff-]{0,62})?[\w\u00a1-\uffff]\.)+"
    r"\p{Ll}{2,63}(?::\d{2,5})?(?:[/?#]\S*)?$"
)
_CONTRACTION_RE = regex.compile(r"^(\w+?)(n['’]t|['’](?:re|ve|ll|d|m|RE|VE|LL|D|M))$")


def _is_icon(c: str) -> bool:
    return c >= "\x80" and unicodedata.category(c) == "So"  # no ASCII character is a symbol of category So


_MULTI_CURRENCY_FIRST = frozenset(c[0] for c in MULTI_CURRENCY)
_DIGITS = frozenset("0123456789")
_ASCII_ALNUM = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _prefix_len(s: str) -> int:
    """Length of the prefix spaCy's English prefix rules split off the front of s (0 = none)."""
    c = s[0]
    if c in PREFIX_CHARS:
        return 1
    if c in _ASCII_ALNUM and c not in _MULTI_CURRENCY_FIRST:  # the common case: nothing to peel
        return 0
    if c == "+":
        return 0 if len(s) > 1 and s[1] in _DIGITS else 1
    if c == ".":
        run = len(s) - len(s.lstrip("."))
        return run if run >= 2 else 0
    for cur in MULTI_CURRENCY:
        if s.startswith(cur):
            return len(cur)
    return 1 if _is_icon(c) else 0


def _suffix_len(s: str) -> int:
    """Length of the suffix spaCy's English suffix rules split off the end of s (0 = none).

    Of all rules that match up to the end, the one starting leftmost wins (regex search semantics)."""
    n = len(s)
    best = n
    c = s[-1]
    if c in _ASCII_ALNUM:  # only `'s` and a unit after a digit can end in a letter or digit
        if n >= 2 and c in "sS" and s[-2] in "'’":
            best = n - 2
    else:
        if c in SUFFIX_CHARS or _is_icon(c):
            best = n - 1
        if c == ".":
            run = n - len(s.rstrip("."))
            if run >= 2:
                best = min(best, n - run)
            elif n >= 2:
                b = s[-2]
                cat = unicodedata.category(b)
                if (b in _DIGITS or cat in ("Ll", "Lo") or b in _DOT_AFTER
                        or (n >= 3 and cat in ("Lu", "Lo") and unicodedata.category(s[-3]) in ("Lu", "Lo"))
                        or (n >= 3 and s[-3] == "°" and b in "FfCcKk")):
                    best = min(best, n - 1)
        elif c == "+" and n >= 2 and s[-2] in _DIGITS:
            best = min(best, n - 1)
    for k in range(1, min(_MAX_UNIT, n - 1) + 1):  # a unit or currency right after the last digit
        if s[-k - 1] in _DIGITS:
            if s[-k:] in SUFFIX_UNITS:
                best = min(best, n - k)
            break
    return n - best


def _special_cases() -> dict[str, list[str]]:
    """Chunks with a fixed split: apostrophe-less contractions, abbreviations, emoticons."""
    out: dict[str, list[str]] = {}
    for word, parts in {"cannot": ["can", "not"], "id": ["i", "d"], "im": ["i", "m"], "ive": ["i", "ve"],
                        "gonna": ["gon", "na"], "gotta": ["got", "ta"], "dont": ["do", "nt"],
                        "cant": ["ca", "nt"], "wont": ["wo", "nt"], "aint": ["ai", "nt"],
                        "shant": ["sha", "nt"]}.items():
        out[word] = parts
        out[word.capitalize()] = [parts[0].capitalize(), *parts[1:]]
    for aux in ("do", "does", "did", "is", "was", "were", "are", "has", "have", "had", "could", "should",
                "would", "must", "might", "need"):
        for w in (aux, aux.capitalize()):
            out[w + "nt"] = [w, "nt"]
    not_contractions = {"ill", "hell", "shell", "well", "were", "its", "shed", "whore", "here", "is", "heve", "ire",
                        "itre", "itve", "shere", "sheve", "thatre", "thatve", "theses", "theys", "thisre", "thisve",
                        "thoses", "yous", "wes"}
    for pron in ("i", "you", "he", "she", "it", "we", "they", "that", "there", "these", "those", "this", "what",
                 "when", "where", "who", "why", "how"):
        for suffix in ("d", "ll", "re", "ve", "s"):
            if pron + suffix not in not_contractions:
                for w in (pron, pron.capitalize()):
                    out.setdefault(w + suffix, [w, suffix])
    for word, parts in {"couldve": ["could", "ve"], "shouldve": ["should", "ve"], "wouldve": ["would", "ve"],
                        "mightve": ["might", "ve"], "mustve": ["must", "ve"], "yall": ["y", "all"],
                        "ima": ["i", "ma"], "darent": ["dare", "nt"], "maynt": ["may", "nt"],
                        "oughtnt": ["ought", "nt"]}.items():
        out[word] = parts
        out[word.capitalize()] = [parts[0].capitalize(), *parts[1:]]
    for hour in range(1, 13):
        for period in ("am", "pm", "a.m.", "p.m."):
            out[f"{hour}{period}"] = [str(hour), period]
    out["and/or"] = ["and/or"]
    for quote_s in ("'s", "'S", "’s", "’S"):
        out[quote_s] = [quote_s]
    abbreviations = ("Adm. Apr. Aug. Bros. Calif. Co. Colo. Conn. Corp. D.C. Dec. Dr. E.G. E.g. Feb. Fla. Ga. "
                     "Gen. Gov. I.E. I.e. Inc. Jan. Jr. Jul. Jun. Ltd. Mar. Mass. Messrs. Mr. Mrs. Ms. Mt. N.Y. "
                     "Nov. Oct. Ph.D. Prof. Rep. Rev. Sen. Sep. Sept. St. a.m. co. e.g. i.e. p.m. v.s. vs. "
                     "ä. ö. ü. Ak. Ala. Ariz. Ark. Del. Ia. Id. Ill. Ind. Kan. Kans. Ky. La. Md. Mich. Minn. "
                     "Miss. Mo. Mont. N.C. N.D. N.H. N.J. N.M. Neb. Nebr. Nev. Okla. Ore. Pa. S.C. Tenn. Va. "
                     "Wash. Wis.").split()
    abbreviations += [f"{c}." for c in "abcdefghijklmnopqrstuvwxyz"]
    for a in abbreviations:
        out[a] = [a]
    emoticons = (":) :-) :)) :( :-( :(( ;) ;-) :] :[ [: ]: =) (= =( :/ :-/ :| :P :p :D 8) 8-) (: ): (; :> :< "
                 "<3 </3 :* :-* :0 :3 =] =[ =| =/ =3 '' ^_^ -_- ._. 0.0 0_0 >.< <.< >.> :'( :') (-: )-: (-; "
                 ":-| :-> :-] :-} :} :1 [= ]= (-8 [-: ;_; @_@ ’’").split()
    for e in emoticons:
        out[e] = [e]
    return out


SPECIAL_CASES: dict[str, list[str]] = _special_cases()
# Special cases made of punctuation get merged back after the affix split, as spaCy's special-case
# matcher does (`[:alpha:]` -> `[:` `alpha` `:]`).
_MERGE = {k for k in SPECIAL_CASES if not regex.search(r"\p{L}", k) and len(k) > 1}
_MAX_MERGE = max(map(len, _MERGE))
# Tokens always concatenate to their chunk, so a merge needs one of these inside the chunk.
_MERGE_ANYWHERE = re.compile("|".join(map(re.escape, sorted(_MERGE, key=len, reverse=True))))


@lru_cache(maxsize=1 << 20)
def tokenize_chunk(chunk: str) -> tuple[str, ...]:
    """Tokens of one whitespace-free chunk, by spaCy's English tokenizer algorithm."""
    special = SPECIAL_CASES.get(chunk)
    if special is not None:
        return tuple(special)
    prefixes: list[str] = []
    suffixes: list[str] = []
    s = chunk
    last = -1
    while s and len(s) != last:
        if s in SPECIAL_CASES:
            break
        last = len(s)
        pre = _prefix_len(s)
        if pre and s[pre:] in SPECIAL_CASES:
            prefixes.append(s[:pre])
            s = s[pre:]
            break
        suf = _suffix_len(s[pre:]) if len(s) > pre else 0
        if suf and s[:-suf] in SPECIAL_CASES:
            suffixes.append(s[-suf:])
            s = s[:-suf]
            break
        if pre and suf and pre + suf <= len(s):
            prefixes.append(s[:pre])
            suffixes.append(s[-suf:])
            s = s[pre:-suf]
        elif pre:
            prefixes.append(s[:pre])
            s = s[pre:]
        elif suf:
            suffixes.append(s[-suf:])
            s = s[:-suf]
    tokens = prefixes
    if s:
        special = SPECIAL_CASES.get(s)
        contraction = None if special is not None or ("'" not in s and "’" not in s) else _CONTRACTION_RE.match(s)
        if special is not None:
            tokens.extend(special)
        elif contraction:
            tokens.extend(contraction.groups())
        elif "." in s and _URL_RE.match(s):
            tokens.append(s)
        elif not _INFIX_TRIGGER.search(s):
            tokens.append(s)
        else:
            start = 0
            for m in _INFIX_RE.finditer(s):
                if m.start() == 0:
                    continue
                if m.start() != start:
                    tokens.append(s[start:m.start()])
                if m.start() != m.end():
                    tokens.append(s[m.start():m.end()])
                start = m.end()
            if s[start:]:
                tokens.append(s[start:])
    tokens.extend(reversed(suffixes))
    if len(tokens) > 1 and _MERGE_ANYWHERE.search(chunk):
        tokens = _merge_specials(tokens)
    return tuple(tokens)


def _merge_specials(tokens: list[str]) -> list[str]:
    """Join runs of 2-3 short tokens that spell a punctuation special case, left to right."""
    out: list[str] = []
    i, n = 0, len(tokens)
    while i < n:
        t = tokens[i]
        if len(t) <= _MAX_MERGE and i + 1 < n:
            two = t + tokens[i + 1]
            if i + 2 < n and two + tokens[i + 2] in _MERGE:
                out.append(two + tokens[i + 2])
                i += 3
                continue
            if two in _MERGE:
                out.append(two)
                i += 2
                continue
        out.append(t)
        i += 1
    return out
