"""An offline English -> French corpus generated from a small grammar.

Every English sentence has exactly one French translation, built by the rules a French grammar
book teaches, so the corpus needs no download and translation errors are the model's own:

- **Noun phrases**: determiner (*the*, *a*/*some*, *my*, *this*/*these*), at most one adjective
  of opinion, size or age (*beautiful, good, small, big, old, new*), which French also puts
  before the noun, at most one of colour or nationality (*red, ..., french, italian*), which
  French puts after it, and one of 33 nouns, singular or plural. Determiners and adjectives
  agree in gender and number (*les petites voitures rouges*), *des* becomes *de* before an
  adjective (*de petits chats*), and *beau, vieux, nouveau* become *bel, vieil, nouvel* before
  a masculine noun that starts with a vowel (*un vieil hôtel*).
- **Verbs** in the present: 15 transitive and 5 intransitive, regular *-er* verbs (*nous
  mangeons*) and irregular ones (*voir, acheter, suivre, dormir, courir*). *you* is always
  *vous*, *they* always *ils*.
- **Negation**: *does not watch* -> *ne regarde pas*, a discontinuous, reordered alignment; an
  indefinite object of a negated verb takes *de* (*pas de pomme*; English *any* for *some*).
- **Object pronouns** go before the French verb: *she helps him* -> *elle l' aide*.
- **Relative clauses** on a noun: *the dog that watches the cat* -> *le chien qui regarde le
  chat*, *the cat that the dog watches* -> *le chat que le chien regarde*; no deeper nesting.
- **Prepositional phrases** (*in, with, behind*) end a clause; up to 3 **clauses** are joined
  by *and* / *but* -> *et* / *mais*; every sentence ends with ``'.'``.
- **Elision** before a vowel sound (every *h* of the lexicon is mute): *l' école*, *j' aime*,
  *n' écoute*, *qu' il*, *d' œufs*, and *cet homme*, *mon école*.

Nouns are people, animals, food, things or places, and each verb, preposition and adjective
says which kinds it takes, so sentences stay sensible and avoid idioms (*petit ami* is a
boyfriend). Tokens are lower case; an elided word keeps its apostrophe as one token (``l'``).
Three sentences of the grammar::

    the small cats do not eat any red apples .
    les petits chats ne mangent pas de pommes rouges .

    i like the old hotel that you visit .
    j' aime le vieil hôtel que vous visitez .

    she helps him but the children that sing do not see her .
    elle l' aide mais les enfants qui chantent ne la voient pas .

:func:`generate_pairs` draws sentences of 3 to 40 tokens, evenly spread over the lengths, and
:func:`load_corpus` splits them into train, validation and test sets.
"""
import collections
import random

from .._checks import check_bool, check_int

# --- lexicon ------------------------------------------------------------------------------------

_ANIMATE = ("person", "animal")
_ANY_KIND = ("person", "animal", "food", "thing", "place")

_Noun = collections.namedtuple("_Noun", "plural fr fr_plural gender kind")
_NOUNS = {  # English singular: English plural, French singular, French plural, gender, kind
    "man": _Noun("men", "homme", "hommes", "m", "person"),
    "woman": _Noun("women", "femme", "femmes", "f", "person"),
    "child": _Noun("children", "enfant", "enfants", "m", "person"),
    "boy": _Noun("boys", "garçon", "garçons", "m", "person"),
    "girl": _Noun("girls", "fille", "filles", "f", "person"),
    "friend": _Noun("friends", "ami", "amis", "m", "person"),
    "teacher": _Noun("teachers", "professeur", "professeurs", "m", "person"),
    "student": _Noun("students", "étudiant", "étudiants", "m", "person"),
    "dog": _Noun("dogs", "chien", "chiens", "m", "animal"),
    "cat": _Noun("cats", "chat", "chats", "m", "animal"),
    "bird": _Noun("birds", "oiseau", "oiseaux", "m", "animal"),
    "horse": _Noun("horses", "cheval", "chevaux", "m", "animal"),
    "mouse": _Noun("mice", "souris", "souris", "f", "animal"),
    "elephant": _Noun("elephants", "éléphant", "éléphants", "m", "animal"),
    "apple": _Noun("apples", "pomme", "pommes", "f", "food"),
    "cake": _Noun("cakes", "gâteau", "gâteaux", "m", "food"),
    "egg": _Noun("eggs", "œuf", "œufs", "m", "food"),
    "orange": _Noun("oranges", "orange", "oranges", "f", "food"),
    "car": _Noun("cars", "voiture", "voitures", "f", "thing"),
    "book": _Noun("books", "livre", "livres", "m", "thing"),
    "letter": _Noun("letters", "lettre", "lettres", "f", "thing"),
    "hat": _Noun("hats", "chapeau", "chapeaux", "m", "thing"),
    "bag": _Noun("bags", "sac", "sacs", "m", "thing"),
    "key": _Noun("keys", "clé", "clés", "f", "thing"),
    "umbrella": _Noun("umbrellas", "parapluie", "parapluies", "m", "thing"),
    "ball": _Noun("balls", "ballon", "ballons", "m", "thing"),
    "house": _Noun("houses", "maison", "maisons", "f", "place"),
    "school": _Noun("schools", "école", "écoles", "f", "place"),
    "garden": _Noun("gardens", "jardin", "jardins", "m", "place"),
    "city": _Noun("cities", "ville", "villes", "f", "place"),
    "museum": _Noun("museums", "musée", "musées", "m", "place"),
    "hotel": _Noun("hotels", "hôtel", "hôtels", "m", "place"),
    "church": _Noun("churches", "église", "églises", "f", "place"),
}

_Adjective = collections.namedtuple("_Adjective", "forms before_vowel kinds",
                                    defaults=(None, _ANY_KIND))
# forms: masculine singular, feminine singular, masculine plural, feminine plural;
# before_vowel: the masculine singular before a vowel sound.
# kinds: the nouns the generator pairs an adjective with. People take no size, age, colour or
# 'good', which would give idioms: petit ami (boyfriend), grand homme (great man), vieille
# fille (spinster), bonne femme.
_NOT_PEOPLE = ("animal", "food", "thing", "place")
_PRE_ADJECTIVES = {  # opinion, size, age: before the noun in both languages
    "beautiful": _Adjective(("beau", "belle", "beaux", "belles"), "bel"),
    "good": _Adjective(("bon", "bonne", "bons", "bonnes"), kinds=_NOT_PEOPLE),
    "small": _Adjective(("petit", "petite", "petits", "petites"), kinds=_NOT_PEOPLE),
    "big": _Adjective(("grand", "grande", "grands", "grandes"), kinds=_NOT_PEOPLE),
    "old": _Adjective(("vieux", "vieille", "vieux", "vieilles"), "vieil", _NOT_PEOPLE),
    "new": _Adjective(("nouveau", "nouvelle", "nouveaux", "nouvelles"), "nouvel"),
}
_POST_ADJECTIVES = {  # colour, nationality: after the noun in French
    "red": _Adjective(("rouge", "rouge", "rouges", "rouges"), kinds=_NOT_PEOPLE),
    "black": _Adjective(("noir", "noire", "noirs", "noires"), kinds=_NOT_PEOPLE),
    "white": _Adjective(("blanc", "blanche", "blancs", "blanches"), kinds=_NOT_PEOPLE),
    "green": _Adjective(("vert", "verte", "verts", "vertes"), kinds=_NOT_PEOPLE),
    "blue": _Adjective(("bleu", "bleue", "bleus", "bleues"), kinds=_NOT_PEOPLE),
    "french": _Adjective(("français", "française", "français", "françaises")),
    "italian": _Adjective(("italien", "italienne", "italiens", "italiennes")),
}

_DETERMINERS = {  # (English singular, plural), (French masculine, feminine singular, plural)
    "the": (("the", "the"), ("le", "la", "les")),
    "a": (("a", "some"), ("un", "une", "des")),
    "my": (("my", "my"), ("mon", "ma", "mes")),
    "this": (("this", "these"), ("ce", "cette", "ces")),
}
_INDEFINITE = ("a", "an", "some")  # English: what French negates with de

_PRONOUNS = {  # English subject: English object, French subject, French object, person
    "i": ("me", "je", "me", 0),
    "you": ("you", "vous", "vous", 4),
    "he": ("him", "il", "le", 2),
    "she": ("her", "elle", "la", 2),
    "we": ("us", "nous", "nous", 3),
    "they": ("them", "ils", "les", 5),
}
# Persons index the French forms: je, tu, il/elle, nous, vous, ils/elles.
_ER_ENDINGS = ("e", "es", "e", "ons", "ez", "ent")


def _er(infinitive):
    """The present of a regular -er verb; -ger verbs keep their g soft: nous mangeons."""
    stem = infinitive[:-2]
    return tuple(stem + ("e" if stem.endswith("g") and end[0] == "o" else "") + end
                 for end in _ER_ENDINGS)


_Verb = collections.namedtuple("_Verb", "third_person fr objects definite_objects",
                               defaults=((), False))
# objects: the kinds of noun a transitive verb takes (empty: intransitive); verbs of liking
# take definite objects only (French says j'aime les chats, not des chats).
_VERBS = {  # English base form: English 3rd person singular, French present, object kinds
    "see": _Verb("sees", ("vois", "vois", "voit", "voyons", "voyez", "voient"), _ANY_KIND),
    "watch": _Verb("watches", _er("regarder"), _ANY_KIND),
    "like": _Verb("likes", _er("aimer"), _ANY_KIND, True),
    "love": _Verb("loves", _er("adorer"), _ANY_KIND, True),
    "look for": _Verb("looks for", _er("chercher"), _ANY_KIND),
    "find": _Verb("finds", _er("trouver"), _ANY_KIND),
    "eat": _Verb("eats", _er("manger"), ("food",)),
    "buy": _Verb("buys", ("achète", "achètes", "achète", "achetons", "achetez", "achètent"),
                ("food", "thing")),
    "cook": _Verb("cooks", _er("préparer"), ("food",)),
    "visit": _Verb("visits", _er("visiter"), ("place",)),
    "leave": _Verb("leaves", _er("quitter"), ("person", "place")),
    "listen to": _Verb("listens to", _er("écouter"), _ANIMATE),
    "help": _Verb("helps", _er("aider"), _ANIMATE),
    "follow": _Verb("follows", ("suis", "suis", "suit", "suivons", "suivez", "suivent"), _ANIMATE),
    "carry": _Verb("carries", _er("porter"), ("animal", "food", "thing")),
    "sleep": _Verb("sleeps", ("dors", "dors", "dort", "dormons", "dormez", "dorment")),
    "swim": _Verb("swims", _er("nager")),
    "sing": _Verb("sings", _er("chanter")),
    "dance": _Verb("dances", _er("danser")),
    "run": _Verb("runs", ("cours", "cours", "court", "courons", "courez", "courent")),
}

_PREPOSITIONS = {  # English: French, kinds of noun it takes
    "in": ("dans", ("place",)),
    "with": ("avec", _ANIMATE),
    "behind": ("derrière", ("person", "animal", "place")),
}
_CONJUNCTIONS = {"and": "et", "but": "mais"}

# French words with another form before a vowel sound; each is a determiner, a pronoun, 'ne',
# the 'de' of 'pas de' or the relative 'que' in this grammar, so the rule needs no context.
_BEFORE_VOWEL = {"je": "j'", "me": "m'", "le": "l'", "la": "l'", "ne": "n'", "de": "d'",
                 "que": "qu'", "ce": "cet", "ma": "mon"}
_FRENCH_VOWELS = "aeiouyàâéèêëîïôœùûh"  # every h of the lexicon is mute (l'homme, l'hôtel)


# --- phrase builders: one translation rule each --------------------------------------------------

Phrase = collections.namedtuple("Phrase", "en fr kind person", defaults=(None,))
Phrase.__doc__ = """English and French tokens of a phrase (the French before elision, which
:func:`sentence` applies); ``kind`` is 'noun', 'pronoun', 'object pronoun', 'verb',
'preposition' or 'clause'; ``person`` (0-5: je, tu, il, nous, vous, ils) is the person a verb
takes with this phrase as its subject."""


def _starts_with_vowel(word):
    return word[0] in _FRENCH_VOWELS


def elide(tokens):
    """French ``tokens`` with elision before a vowel sound: 'le arbre' -> "l' arbre", 'je aime'
    -> "j' aime", 'ce homme' -> 'cet homme', 'ma école' -> 'mon école'."""
    if not isinstance(tokens, (list, tuple)) or not all(isinstance(t, str) and t for t in tokens):
        raise TypeError(f"tokens must be a list of non-empty str, got {tokens!r}")
    return [_BEFORE_VOWEL.get(word, word) if _starts_with_vowel(following) else word
            for word, following in zip(tokens, list(tokens[1:]) + ["."])]


def _lookup(table, key, name):
    if key not in table:
        raise ValueError(f"{name} must be one of {sorted(table)}, got {key!r}")
    return table[key]


def _check_phrase(name, value, kinds):
    if not isinstance(value, Phrase) or value.kind not in kinds:
        raise TypeError(f"{name} must be a Phrase of kind {' or '.join(kinds)}, got {value!r}")


def pronoun(word, obj=False):
    """Subject pronoun ``word`` ('i', 'you', 'he', 'she', 'we', 'they'), or with ``obj`` the
    object pronoun of the same person: pronoun('he', obj=True) -> 'him' / 'le'."""
    en_obj, fr, fr_obj, person = _lookup(_PRONOUNS, word, "word")
    check_bool("obj", obj)
    if obj:
        return Phrase([en_obj], [fr_obj], "object pronoun")
    return Phrase([word], [fr], "pronoun", person)


def _split_adjectives(adjectives):
    """``adjectives`` as (pre-nominal list, post-nominal list), at most one of each."""
    if isinstance(adjectives, (list, tuple)):
        pre = [a for a in adjectives if a in _PRE_ADJECTIVES]
        post = [a for a in adjectives if a in _POST_ADJECTIVES]
        if len(pre) <= 1 and len(post) <= 1 and len(pre) + len(post) == len(adjectives):
            return pre, post
    raise ValueError(f"adjectives must hold at most one of {sorted(_PRE_ADJECTIVES)} and one "
                     f"of {sorted(_POST_ADJECTIVES)}, got {adjectives!r}")


def _pre_adjective(word, form, noun):
    """The French ``form`` (see _Adjective) of a pre-nominal adjective before ``noun``."""
    adjective = _PRE_ADJECTIVES[word]
    if form == 0 and adjective.before_vowel and _starts_with_vowel(noun):
        return adjective.before_vowel  # un vieil hôtel
    return adjective.forms[form]


def noun_phrase(noun, plural=False, det="the", adjectives=()):
    """Determiner, adjectives and noun, agreeing in gender and number.

    noun_phrase('car', True, 'the', ['red', 'small']) -> 'the small red cars' /
    'les petites voitures rouges'. ``det`` is 'the', 'a' (a/an, plural some), 'my' or 'this'
    (plural these); ``adjectives`` holds at most one pre-nominal and one post-nominal word.
    """
    entry = _lookup(_NOUNS, noun, "noun")
    check_bool("plural", plural)
    en_dets, fr_dets = _lookup(_DETERMINERS, det, "det")
    pre, post = _split_adjectives(adjectives)
    form = 2 * plural + (entry.gender == "f")  # index into _Adjective.forms
    fr_noun = entry.fr_plural if plural else entry.fr
    fr_det = fr_dets[min(form, 2)]
    fr_pre = [_pre_adjective(word, form, fr_noun) for word in pre]
    if fr_pre and fr_det == "des":
        fr_det = "de"  # de petits chats
    fr = [fr_det] + fr_pre + [fr_noun] + [_POST_ADJECTIVES[word].forms[form] for word in post]
    en = pre + post + [entry.plural if plural else noun]
    en_det = en_dets[plural]
    if en_det == "a" and en[0][0] in "aeiou":
        en_det = "an"
    return Phrase([en_det] + en, fr, "noun", 5 if plural else 2)


def _negated_object(obj):
    """The object of a negated verb: indefinite articles become 'de' (English 'some' -> 'any')."""
    if obj.en[0] not in _INDEFINITE:
        return obj
    en = ["any"] + obj.en[1:] if obj.en[0] == "some" else obj.en
    return Phrase(en, ["de"] + obj.fr[1:], obj.kind, obj.person)  # de petits chats stays


def verb_phrase(verb, person, obj=None, negated=False):
    """``verb`` in the present for ``person`` (0-5: je, tu, il, nous, vous, ils) with its object.

    verb_phrase('watch', 2, noun_phrase('cat')) -> 'watches the cat' / 'regarde le chat';
    with ``negated``: 'does not watch the cat' / 'ne regarde pas le chat'. Object pronouns go
    before the French verb ('ne le regarde pas'); a transitive verb without ``obj`` is the verb
    of an object relative clause.
    """
    entry = _lookup(_VERBS, verb, "verb")
    person = check_int("person", person, 0, 5)
    check_bool("negated", negated)
    if obj is not None:
        _check_phrase("obj", obj, ("noun", "object pronoun"))
        if not entry.objects:
            raise ValueError(f"verb {verb!r} takes no object, got obj={obj!r}")
        obj = _negated_object(obj) if negated else obj
    if negated:
        en = ["does" if person == 2 else "do", "not"] + verb.split()
    else:
        en = (entry.third_person if person == 2 else verb).split()
    clitic = obj is not None and obj.kind == "object pronoun"
    fr = (obj.fr if clitic else []) + [entry.fr[person]]
    if negated:
        fr = ["ne"] + fr + ["pas"]
    if obj is not None:
        en += obj.en
        fr += [] if clitic else obj.fr
    return Phrase(en, fr, "verb")


def relative_clause(head, verb, obj=None, subject=None, negated=False):
    """Noun phrase ``head`` followed by a relative clause about it.

    Without ``subject``, ``head`` is the subject of ``verb``: 'the dog that watches the cat' /
    'le chien qui regarde le chat'. With ``subject`` (a noun phrase or pronoun), ``head`` is the
    object of ``verb`` and ``obj`` must be None: 'the cat that the dog watches' / 'le chat que
    le chien regarde'.
    """
    _check_phrase("head", head, ("noun",))
    if subject is None:
        predicate = verb_phrase(verb, head.person, obj, negated)
        return Phrase(head.en + ["that"] + predicate.en, head.fr + ["qui"] + predicate.fr,
                      "noun", head.person)
    _check_phrase("subject", subject, ("noun", "pronoun"))
    if obj is not None or not _lookup(_VERBS, verb, "verb").objects:
        raise ValueError(f"an object relative clause needs a transitive verb and obj=None, "
                         f"got verb={verb!r}, obj={obj!r}")
    predicate = verb_phrase(verb, subject.person, None, negated)
    return Phrase(head.en + ["that"] + subject.en + predicate.en,
                  head.fr + ["que"] + subject.fr + predicate.fr, "noun", head.person)


def prepositional_phrase(preposition, noun):
    """'in the garden' / 'dans le jardin' from 'in' and a noun phrase."""
    fr_prep, _ = _lookup(_PREPOSITIONS, preposition, "preposition")
    _check_phrase("noun", noun, ("noun",))
    return Phrase([preposition] + noun.en, [fr_prep] + noun.fr, "preposition")


def clause(subject, verb, obj=None, negated=False, pp=None):
    """Subject, verb agreeing with it, object and an optional prepositional phrase ``pp``:
    clause(pronoun('we'), 'eat', noun_phrase('cake')) -> 'we eat the cake' / 'nous mangeons
    le gâteau'."""
    _check_phrase("subject", subject, ("noun", "pronoun"))
    predicate = verb_phrase(verb, subject.person, obj, negated)
    en, fr = subject.en + predicate.en, subject.fr + predicate.fr
    if pp is not None:
        _check_phrase("pp", pp, ("preposition",))
        en, fr = en + pp.en, fr + pp.fr
    return Phrase(en, fr, "clause")


def sentence(clauses, conjunctions=()):
    """``(src_tokens, tgt_tokens)`` of clauses joined by ``conjunctions`` ('and', 'but') + '.'."""
    if not isinstance(clauses, (list, tuple)) or not clauses:
        raise ValueError(f"clauses must be a non-empty list of clauses, got {clauses!r}")
    for i, part in enumerate(clauses):
        _check_phrase(f"clauses[{i}]", part, ("clause",))
    if not isinstance(conjunctions, (list, tuple)) or len(conjunctions) != len(clauses) - 1 \
            or any(word not in _CONJUNCTIONS for word in conjunctions):
        raise ValueError(f"conjunctions must be a list of {len(clauses) - 1} words from "
                         f"{sorted(_CONJUNCTIONS)}, got {conjunctions!r}")
    en, fr = list(clauses[0].en), list(clauses[0].fr)
    for conjunction, part in zip(conjunctions, clauses[1:]):
        en += [conjunction] + part.en
        fr += [_CONJUNCTIONS[conjunction]] + part.fr
    return en + ["."], elide(fr + ["."])


# --- random sentences ----------------------------------------------------------------------------

_NOUNS_BY_KIND = {kind: [n for n, e in _NOUNS.items() if e.kind == kind] for kind in _ANY_KIND}
_ADJECTIVES_BY_KIND = {kind: [[a for a, e in table.items() if kind in e.kinds]
                              for table in (_PRE_ADJECTIVES, _POST_ADJECTIVES)]
                       for kind in _ANY_KIND}
# Determiners by (kind, definite only); people take no 'my' (ma femme: my wife).
_NOUN_DETERMINERS = {(kind, definite): [d for d in _DETERMINERS if not (definite and d == "a")
                                        and not (kind == "person" and d == "my")]
                     for kind in _ANY_KIND for definite in (False, True)}
_TRANSITIVE = [v for v, e in _VERBS.items() if e.objects]
_INTRANSITIVE = [v for v, e in _VERBS.items() if not e.objects]
_MAX_CLAUSE = 20  # source tokens per clause: longer sentences get more clauses
_PATIENCE = 200  # misses in a row after which a sentence length counts as exhausted


def _random_noun(rng, kinds, richness, definite=False):
    """A random noun phrase of one of ``kinds`` and its kind; ``richness`` in [0, 1] adds
    adjectives."""
    kind = rng.choice(kinds)
    det = rng.choice(_NOUN_DETERMINERS[kind, definite])
    adjectives = [rng.choice(words) for words in _ADJECTIVES_BY_KIND[kind]
                  if rng.random() < richness / 2]
    return noun_phrase(rng.choice(_NOUNS_BY_KIND[kind]), rng.random() < 0.5, det,
                       adjectives), kind


def _reflexive(subject_person, object_person):
    """True for the pronoun pairs English would make reflexive: I/we with me/us, you with you."""
    return {subject_person, object_person} <= {0, 3} or subject_person == object_person == 4


def _random_subject(rng, richness, nested):
    """A random pronoun or animate noun phrase; in a ``nested`` clause no relative clause."""
    if rng.random() < 0.9 - 0.8 * richness:
        return pronoun(rng.choice(tuple(_PRONOUNS)))
    head, kind = _random_noun(rng, _ANIMATE, richness)
    if not nested and rng.random() < richness / 2:
        head = _random_relative(rng, head, kind, richness)
    return head


def _random_predicate(rng, subject, richness, nested):
    """``(verb, obj, negated)`` for ``subject``; in a ``nested`` clause no relative clause."""
    verb = rng.choice(_INTRANSITIVE if rng.random() < 0.4 - 0.3 * richness else _TRANSITIVE)
    entry, obj = _VERBS[verb], None
    if "person" in entry.objects and rng.random() < 0.7 - 0.7 * richness:
        obj = pronoun(rng.choice([p for p, (*_, person) in _PRONOUNS.items()
                                  if not _reflexive(subject.person, person)]), obj=True)
    elif entry.objects:
        obj, kind = _random_noun(rng, entry.objects, richness, entry.definite_objects)
        if not nested and rng.random() < richness / 2:
            obj = _random_relative(rng, obj, kind, richness)
    return verb, obj, rng.random() < 0.25


def _random_relative(rng, head, kind, richness):
    """``head`` + a random subject ('qui') or object ('que') relative clause."""
    if kind in _ANIMATE and rng.random() < 0.5:
        verb, obj, negated = _random_predicate(rng, head, richness, nested=True)
        return relative_clause(head, verb, obj, negated=negated)
    verb = rng.choice([v for v in _TRANSITIVE if kind in _VERBS[v].objects])
    return relative_clause(head, verb, subject=_random_subject(rng, richness, nested=True),
                           negated=rng.random() < 0.25)


def _random_clause(rng, richness):
    """A random clause; ``richness`` in [0, 1] makes it longer (noun phrases, relative clauses,
    prepositional phrases)."""
    subject = _random_subject(rng, richness, nested=False)
    verb, obj, negated = _random_predicate(rng, subject, richness, nested=False)
    pp = None
    if rng.random() < richness / 2:
        preposition = rng.choice(list(_PREPOSITIONS))
        noun, _ = _random_noun(rng, _PREPOSITIONS[preposition][1], richness)
        pp = prepositional_phrase(preposition, noun)
    return clause(subject, verb, obj, negated, pp)


def _clause_of_length(rng, length, spare):
    """A random clause of ``length`` source tokens (2 to ``_MAX_CLAUSE``).

    Clauses drawn on the way with another length wait in ``spare`` (a dict of lists by length)
    for a later call instead of being thrown away.
    """
    while not spare[length]:
        candidate = _random_clause(rng, (length - 2) / (_MAX_CLAUSE - 2))
        if len(candidate.en) <= _MAX_CLAUSE:
            spare[len(candidate.en)].append(candidate)
    return spare[length].pop()


def _random_sizes(rng, total, parts, spare):
    """``parts`` random clause lengths in [2, ``_MAX_CLAUSE``] that sum to ``total``, preferring
    the lengths of the clauses waiting in ``spare``."""
    sizes = []
    for left in range(parts - 1, -1, -1):  # clauses left after this one
        rest = total - sum(sizes)
        low, high = max(2, rest - _MAX_CLAUSE * left), min(_MAX_CLAUSE, rest - 2 * left)
        waiting = [size for size in range(low, high + 1) if spare[size]]
        sizes.append(rng.choice(waiting) if waiting else rng.randint(low, high))
    return sizes


def _random_sentence(rng, length, spare):
    """A random ``(src_tokens, tgt_tokens)`` pair with ``length`` (>= 3) source tokens."""
    fewest = -(-length // (_MAX_CLAUSE + 1))
    n_clauses = rng.randint(fewest, max(fewest, min(fewest + 1, length // 3)))
    sizes = _random_sizes(rng, length - n_clauses, n_clauses, spare)  # - conjunctions and '.'
    conjunctions = ["and"] * (n_clauses - 1)
    if conjunctions and rng.random() < 0.5:  # at most one 'but'
        conjunctions[rng.randrange(n_clauses - 1)] = "but"
    return sentence([_clause_of_length(rng, size, spare) for size in sizes], conjunctions)


# --- corpus --------------------------------------------------------------------------------------

def generate_pairs(n, seed=0, min_len=3, max_len=40):
    """``n`` distinct random ``(src_tokens, tgt_tokens)`` pairs, in random order.

    Source lengths (with the final '.') are spread evenly over [``min_len``, ``max_len``]:
    each length gets the same share, except lengths with fewer distinct sentences (there are
    only 30 of length 3), whose share goes to the others. Deterministic for a ``seed``.
    """
    n = check_int("n", n, minimum=1)
    seed = check_int("seed", seed)
    min_len = check_int("min_len", min_len, minimum=3)
    max_len = check_int("max_len", max_len, minimum=min_len)
    rng, spare = random.Random(seed), collections.defaultdict(list)
    found = {length: {} for length in range(min_len, max_len + 1)}  # source tuple -> pair
    misses, exhausted = dict.fromkeys(found, 0), set()
    while True:
        open_lengths = [length for length in found if length not in exhausted]
        if not open_lengths:
            raise ValueError(f"there are only {sum(map(len, found.values()))} distinct "
                             f"sentences of {min_len} to {max_len} tokens, got n={n}")
        share = -(-(n - sum(len(found[length]) for length in exhausted)) // len(open_lengths))
        wanting = [length for length in open_lengths if len(found[length]) < share]
        if not wanting:
            break
        length = rng.choice(wanting)
        src, tgt = _random_sentence(rng, length, spare)
        if tuple(src) in found[length]:
            misses[length] += 1
            if misses[length] == _PATIENCE:
                exhausted.add(length)
        else:
            found[length][tuple(src)], misses[length] = (src, tgt), 0
    pairs = [pair for pairs_of_length in found.values() for pair in pairs_of_length.values()]
    rng.shuffle(pairs)
    return pairs[:n]  # the shares may add up to a few more than n


Corpus = collections.namedtuple("Corpus", ["train", "val", "test"])
Corpus.__doc__ = "Train, validation and test lists of ``(src_tokens, tgt_tokens)`` pairs."


def load_corpus(n_train=8000, n_val=500, n_test=500, seed=0, max_len=40):
    """The generated corpus split into disjoint train, validation and test sets.

    The splits are stratified by source length: each has the length profile of the whole
    (by default, roughly uniform over 3 to ``max_len`` tokens).
    """
    sizes = (check_int("n_train", n_train, minimum=1), check_int("n_val", n_val),
             check_int("n_test", n_test))
    pairs = generate_pairs(sum(sizes), seed, max_len=max_len)
    pairs.sort(key=lambda pair: len(pair[0]))  # stable: random order within a length
    # Deal the sorted pairs to the splits in proportion: split i takes the slots (j + 0.5) / n_i.
    slots = sorted(((j + 0.5) / size, split) for split, size in enumerate(sizes)
                   for j in range(size))
    splits = [[] for _ in sizes]
    for pair, (_, split) in zip(pairs, slots):
        splits[split].append(pair)
    rng = random.Random(seed)
    for split in splits:
        rng.shuffle(split)
    return Corpus(*splits)
