import pytest

from d2lattn.data.grammar import (Corpus, clause, elide, generate_pairs, load_corpus,
                                  noun_phrase, prepositional_phrase, pronoun, relative_clause,
                                  sentence, verb_phrase)

VOWELS = "aeiouyàâéèêëîïôœùûh"  # the mute h of homme, hôtel counts as a vowel sound


@pytest.fixture(scope="module")
def corpus():
    return load_corpus()


def text(phrase):
    return " ".join(phrase.en), " ".join(phrase.fr)


def finished(*clauses, conjunctions=()):
    """English and French text of the sentence made of ``clauses``."""
    src, tgt = sentence(list(clauses), list(conjunctions))
    return " ".join(src), " ".join(tgt)


def thirds(pairs, low=3, high=40):
    """Counts of pairs whose source length falls in each third of [low, high]."""
    edges = [low + (high - low + 1) * i / 3 for i in range(4)]
    return [sum(edges[i] <= len(src) < edges[i + 1] for src, _ in pairs) for i in range(3)]


# --- noun phrases: agreement, adjective position, determiners -----------------------------------

@pytest.mark.parametrize("args, english, french", [
    (("car", True, "the", ["red", "small"]), "the small red cars", "les petites voitures rouges"),
    (("cat", True, "the", ["black", "small"]), "the small black cats", "les petits chats noirs"),
    (("car", False, "the", ["red"]), "the red car", "la voiture rouge"),
    (("car", False, "a", ["white"]), "a white car", "une voiture blanche"),
    (("house", False, "the", ["old"]), "the old house", "la vieille maison"),
    (("house", True, "this", ["old"]), "these old houses", "ces vieilles maisons"),
    (("hotel", False, "a", ["old"]), "an old hotel", "un vieil hôtel"),
    (("hotel", True, "the", ["old"]), "the old hotels", "les vieux hôtels"),
    (("bird", False, "my", ["beautiful"]), "my beautiful bird", "mon bel oiseau"),
    (("horse", True, "the", ["beautiful"]), "the beautiful horses", "les beaux chevaux"),
    (("elephant", False, "the", ["new", "italian"]), "the new italian elephant",
     "le nouvel éléphant italien"),
    (("car", False, "the", ["new"]), "the new car", "la nouvelle voiture"),
    (("cake", True, "a", []), "some cakes", "des gâteaux"),
    (("cake", True, "a", ["good"]), "some good cakes", "de bons gâteaux"),
    (("cake", True, "a", ["french"]), "some french cakes", "des gâteaux français"),
    (("egg", False, "a", []), "an egg", "un œuf"),
    (("mouse", True, "the", ["green"]), "the green mice", "les souris vertes"),
    (("man", True, "the", []), "the men", "les hommes"),
])
def test_noun_phrase_agreement_and_adjective_order(args, english, french):
    phrase = noun_phrase(*args)
    assert text(phrase) == (english, french)
    assert phrase.kind == "noun" and phrase.person == (5 if args[1] else 2)


def test_noun_phrase_defaults_to_the_singular_definite():
    assert text(noun_phrase("dog")) == ("the dog", "le chien")


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(noun="unicorn"), ValueError, r"noun must be one of \[.*'apple'"),
    (dict(noun="car", plural=1), TypeError, "plural must be a bool, got 1"),
    (dict(noun="car", det="an"), ValueError, r"det must be one of \['a', 'my', 'the', 'this'\]"),
    (dict(noun="car", adjectives=["small", "big"]), ValueError, "at most one of"),
    (dict(noun="car", adjectives=["red", "blue"]), ValueError, "at most one of"),
    (dict(noun="car", adjectives=["fast"]), ValueError, r"got \['fast'\]"),
    (dict(noun="car", adjectives="red"), ValueError, "got 'red'"),
])
def test_noun_phrase_rejects_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        noun_phrase(**kwargs)


# --- elision ------------------------------------------------------------------------------------

@pytest.mark.parametrize("tokens, expected", [
    ("le hôtel", "l' hôtel"), ("la école", "l' école"), ("je aime", "j' aime"),
    ("il me aide", "il m' aide"), ("ne écoute", "n' écoute"), ("que il", "qu' il"),
    ("pas de œufs", "pas d' œufs"), ("ce homme", "cet homme"), ("ma école", "mon école"),
    ("la voiture", "la voiture"), ("les hôtels", "les hôtels"), ("le", "le"),
    ("ce vieil homme", "ce vieil homme"), ("je ne aime pas", "je n' aime pas"),
])
def test_elide(tokens, expected):
    assert " ".join(elide(tokens.split())) == expected


def test_elide_rejects_a_string():
    with pytest.raises(TypeError, match="tokens must be a list of non-empty str"):
        elide("le hôtel")


# --- verbs, pronouns, negation, relative clauses, sentences --------------------------------------

@pytest.mark.parametrize("subject, verb, obj, negated, english, french", [
    ("we", "eat", ("cake",), False, "we eat the cake .", "nous mangeons le gâteau ."),
    ("they", "like", ("dog", True), False, "they like the dogs .", "ils aiment les chiens ."),
    ("i", "like", ("school",), False, "i like the school .", "j' aime l' école ."),
    ("you", "watch", ("cat",), False, "you watch the cat .", "vous regardez le chat ."),
    ("he", "eat", ("apple", False, "a"), False, "he eats an apple .", "il mange une pomme ."),
    ("she", "look for", ("key",), False, "she looks for the key .", "elle cherche la clé ."),
    ("we", "see", ("bird",), False, "we see the bird .", "nous voyons l' oiseau ."),
    ("they", "follow", ("man",), False, "they follow the man .", "ils suivent l' homme ."),
    ("i", "buy", ("bag",), False, "i buy the bag .", "j' achète le sac ."),
    ("we", "buy", ("bag",), False, "we buy the bag .", "nous achetons le sac ."),
    ("you", "listen to", ("child",), False, "you listen to the child .",
     "vous écoutez l' enfant ."),
    ("he", "like", ("cat",), True, "he does not like the cat .", "il n' aime pas le chat ."),
    ("they", "watch", ("cat",), True, "they do not watch the cat .",
     "ils ne regardent pas le chat ."),
    ("i", "eat", ("apple", False, "a"), True, "i do not eat an apple .",
     "je ne mange pas de pomme ."),
    ("we", "eat", ("egg", True, "a"), True, "we do not eat any eggs .",
     "nous ne mangeons pas d' œufs ."),
    ("she", "eat", ("egg", True, "a", ["small"]), True, "she does not eat any small eggs .",
     "elle ne mange pas de petits œufs ."),
])
def test_clauses_with_a_noun_object(subject, verb, obj, negated, english, french):
    got = finished(clause(pronoun(subject), verb, noun_phrase(*obj), negated))
    assert got == (english, french)


@pytest.mark.parametrize("subject, verb, obj, negated, english, french", [
    ("she", "help", "he", False, "she helps him .", "elle l' aide ."),
    ("they", "watch", "i", False, "they watch me .", "ils me regardent ."),
    ("he", "like", "i", False, "he likes me .", "il m' aime ."),
    ("i", "see", "they", False, "i see them .", "je les vois ."),
    ("we", "follow", "you", False, "we follow you .", "nous vous suivons ."),
    ("she", "see", "he", True, "she does not see him .", "elle ne le voit pas ."),
    ("i", "listen to", "she", True, "i do not listen to her .", "je ne l' écoute pas ."),
    ("you", "help", "we", True, "you do not help us .", "vous ne nous aidez pas ."),
])
def test_object_pronouns_go_before_the_french_verb(subject, verb, obj, negated, english, french):
    got = finished(clause(pronoun(subject), verb, pronoun(obj, obj=True), negated))
    assert got == (english, french)


@pytest.mark.parametrize("subject, verb, english, french", [
    ("i", "sleep", "i sleep .", "je dors ."), ("she", "run", "she runs .", "elle court ."),
    ("we", "swim", "we swim .", "nous nageons ."), ("you", "sing", "you sing .", "vous chantez ."),
    ("they", "dance", "they dance .", "ils dansent ."), ("he", "sleep", "he sleeps .", "il dort ."),
])
def test_intransitive_verbs_agree_with_their_subject(subject, verb, english, french):
    assert finished(clause(pronoun(subject), verb)) == (english, french)


def test_noun_subjects_agree_in_number():
    assert finished(clause(noun_phrase("dog", True), "run")) == (
        "the dogs run .", "les chiens courent .")
    assert finished(clause(noun_phrase("child"), "sing", negated=True)) == (
        "the child does not sing .", "l' enfant ne chante pas .")


def test_verb_phrase_forms():
    assert text(verb_phrase("watch", 2, noun_phrase("cat"))) == ("watches the cat",
                                                                 "regarde le chat")
    assert text(verb_phrase("eat", 1)) == ("eat", "manges")  # tu: never drawn, still right
    assert text(verb_phrase("carry", 2, negated=True)) == ("does not carry", "ne porte pas")
    assert text(verb_phrase("eat", 3)) == ("eat", "mangeons")


def test_relative_clauses():
    subject_rel = relative_clause(noun_phrase("dog"), "watch", noun_phrase("cat"))
    assert text(subject_rel) == ("the dog that watches the cat", "le chien qui regarde le chat")
    object_rel = relative_clause(noun_phrase("cat"), "watch", subject=noun_phrase("dog"))
    assert text(object_rel) == ("the cat that the dog watches", "le chat que le chien regarde")
    plural = relative_clause(noun_phrase("dog", True), "eat", noun_phrase("cake", True, "a"),
                             negated=True)
    assert text(plural) == ("the dogs that do not eat any cakes",
                            "les chiens qui ne mangent pas de gâteaux")
    assert subject_rel.person == 2 and plural.person == 5
    pronoun_rel = relative_clause(noun_phrase("letter"), "look for", subject=pronoun("he"))
    assert finished(clause(pronoun("i"), "find", pronoun_rel)) == (
        "i find the letter that he looks for .", "je trouve la lettre qu' il cherche .")


def test_prepositional_phrase_and_conjunctions():
    pp = prepositional_phrase("in", noun_phrase("garden"))
    assert text(pp) == ("in the garden", "dans le jardin")
    first = clause(pronoun("we"), "sing", pp=pp)
    second = clause(pronoun("he"), "sleep", negated=True)
    assert finished(first, second, conjunctions=["but"]) == (
        "we sing in the garden but he does not sleep .",
        "nous chantons dans le jardin mais il ne dort pas .")
    assert finished(first, second, conjunctions=["and"])[1].split()[5] == "et"


def test_the_module_docstring_examples():
    cats = clause(noun_phrase("cat", True, "the", ["small"]), "eat",
                  noun_phrase("apple", True, "a", ["red"]), negated=True)
    assert finished(cats) == ("the small cats do not eat any red apples .",
                       "les petits chats ne mangent pas de pommes rouges .")
    hotel = relative_clause(noun_phrase("hotel", False, "the", ["old"]), "visit",
                            subject=pronoun("you"))
    assert finished(clause(pronoun("i"), "like", hotel)) == (
        "i like the old hotel that you visit .", "j' aime le vieil hôtel que vous visitez .")
    children = relative_clause(noun_phrase("child", True), "sing")
    assert finished(clause(pronoun("she"), "help", pronoun("he", obj=True)),
             clause(children, "see", pronoun("she", obj=True), negated=True),
             conjunctions=["but"]) == (
        "she helps him but the children that sing do not see her .",
        "elle l' aide mais les enfants qui chantent ne la voient pas .")


def test_builders_reject_bad_arguments():
    cat, cl = noun_phrase("cat"), clause(pronoun("i"), "sleep")
    with pytest.raises(ValueError, match=r"word must be one of .*got 'it'"):
        pronoun("it")
    with pytest.raises(ValueError, match=r"verb must be one of .*got 'fly'"):
        verb_phrase("fly", 0)
    with pytest.raises(ValueError, match=r"person must be an int in \[0, 5\], got 6"):
        verb_phrase("eat", 6)
    with pytest.raises(ValueError, match="verb 'sleep' takes no object"):
        verb_phrase("sleep", 2, cat)
    with pytest.raises(TypeError, match="obj must be a Phrase of kind noun or object pronoun"):
        verb_phrase("eat", 2, pronoun("he"))
    with pytest.raises(TypeError, match="head must be a Phrase of kind noun"):
        relative_clause(pronoun("he"), "sleep")
    with pytest.raises(ValueError, match="needs a transitive verb and obj=None"):
        relative_clause(cat, "sleep", subject=pronoun("i"))
    with pytest.raises(ValueError, match="needs a transitive verb and obj=None"):
        relative_clause(cat, "eat", noun_phrase("cake"), subject=pronoun("i"))
    with pytest.raises(TypeError, match="subject must be a Phrase of kind noun or pronoun"):
        clause(pronoun("he", obj=True), "sleep")
    with pytest.raises(ValueError, match=r"preposition must be one of .*got 'on'"):
        prepositional_phrase("on", cat)
    with pytest.raises(TypeError, match="noun must be a Phrase of kind noun"):
        prepositional_phrase("in", pronoun("he"))
    with pytest.raises(ValueError, match="clauses must be a non-empty list"):
        sentence([])
    with pytest.raises(TypeError, match=r"clauses\[1\] must be a Phrase of kind clause"):
        sentence([cl, cat], ["and"])
    with pytest.raises(ValueError, match=r"conjunctions must be a list of 1 words"):
        sentence([cl, cl])
    with pytest.raises(ValueError, match=r"from \['and', 'but'\], got \['or'\]"):
        sentence([cl, cl], ["or"])


# --- generate_pairs -----------------------------------------------------------------------------

def test_generate_pairs_is_deterministic_per_seed():
    first, again, other = (generate_pairs(300, seed) for seed in (3, 3, 4))
    assert first == again
    assert first != other
    assert all(isinstance(src, list) and isinstance(tgt, list) for src, tgt in first)


def test_translation_is_a_function_of_the_source():
    """The same English sentence drawn under two seeds gets the same French."""
    seen, shared = {}, 0
    for seed in range(4):
        for src, tgt in generate_pairs(400, seed, max_len=5):
            shared += tuple(src) in seen
            assert seen.setdefault(tuple(src), tgt) == tgt
    assert shared > 100


def test_generate_pairs_are_distinct_and_within_bounds():
    pairs = generate_pairs(400, seed=1, min_len=5, max_len=12)
    assert len(pairs) == 400 and len({tuple(src) for src, _ in pairs}) == 400
    counts = [sum(len(src) == length for src, _ in pairs) for length in range(5, 13)]
    assert counts == [50] * 8  # 400 sentences over 8 lengths, evenly


def test_generate_pairs_finds_every_three_token_sentence():
    """The only 3-token sentences are a pronoun, an intransitive verb and '.': 6 x 5 = 30."""
    pairs = generate_pairs(30, seed=0, max_len=3)
    expected = {(p, v + ("s" if p in ("he", "she") else ""), ".")
                for p in ("i", "you", "he", "she", "we", "they")
                for v in ("sleep", "swim", "sing", "dance", "run")}
    assert {tuple(src) for src, _ in pairs} == expected
    with pytest.raises(ValueError, match="there are only 30 distinct sentences of 3 to 3 "
                                         "tokens, got n=31"):
        generate_pairs(31, seed=0, max_len=3)


@pytest.mark.parametrize("kwargs, match", [
    (dict(n=0), "n must be an int >= 1, got 0"),
    (dict(n=5, seed=-1), "seed must be an int >= 0, got -1"),
    (dict(n=5, seed=True), "seed must be an int >= 0, got True"),
    (dict(n=5, min_len=2), "min_len must be an int >= 3, got 2"),
    (dict(n=5, min_len=10, max_len=9), "max_len must be an int >= 10, got 9"),
])
def test_generate_pairs_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        generate_pairs(**kwargs)


# --- the default corpus -------------------------------------------------------------------------

def test_load_corpus_splits_are_disjoint_and_sized(corpus):
    assert isinstance(corpus, Corpus)
    assert [len(split) for split in corpus] == [8000, 500, 500]
    sources = [{tuple(src) for src, _ in split} for split in corpus]
    assert [len(split) for split in sources] == [8000, 500, 500]
    assert not (sources[0] & sources[1] or sources[0] & sources[2] or sources[1] & sources[2])


def test_load_corpus_with_other_sizes_and_lengths():
    corpus = load_corpus(60, 30, 30, seed=2, max_len=12)
    assert [len(split) for split in corpus] == [60, 30, 30]
    assert corpus == load_corpus(60, 30, 30, seed=2, max_len=12)
    for split in corpus:  # 120 pairs, 12 of each length 3..12, dealt 6, 3, 3 to the splits
        counts = [sum(len(src) == length for src, _ in split) for length in range(3, 13)]
        assert counts == [len(split) // 10] * 10
    assert len({tuple(src) for split in corpus for src, _ in split}) == 120


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_train=0), "n_train must be an int >= 1, got 0"),
    (dict(n_val=-1), "n_val must be an int >= 0, got -1"),
    (dict(n_test=2.0), "n_test must be an int >= 0, got 2.0"),
    (dict(max_len=2), "max_len must be an int >= 3, got 2"),
])
def test_load_corpus_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        load_corpus(**kwargs)


def test_lengths_are_spread_evenly(corpus):
    pairs = corpus.train + corpus.val + corpus.test
    counts = {length: sum(len(src) == length for src, _ in pairs) for length in range(3, 41)}
    assert sum(counts.values()) == len(pairs)  # every length in [3, 40]
    assert counts[3] == 30  # all there are
    share = (len(pairs) - 30) / 37
    assert all(abs(counts[length] - share) <= 3 for length in range(4, 41)), counts
    for split in corpus:  # stratified: every split has a third of its sentences in each third
        assert all(abs(count - len(split) / 3) <= len(split) / 20 for count in thirds(split))
    assert min(thirds(corpus.test)) >= 100


def test_vocabulary_sizes(corpus):
    source = {token for src, _ in corpus.train for token in src}
    target = {token for _, tgt in corpus.train for token in tgt}
    assert 100 <= len(source) <= 250 and 100 <= len(target) <= 250
    assert all(token == token.lower() and " " not in token for token in source | target)


def test_french_is_elided_and_english_articles_agree(corpus):
    elidable = {"je", "me", "le", "la", "ne", "de", "que", "ce", "ma"}
    for src, tgt in corpus.train:
        assert src[-1] == tgt[-1] == "."
        for word, following in zip(tgt, tgt[1:]):
            assert not (word in elidable and following[0] in VOWELS), " ".join(tgt)
        for word, following in zip(src, src[1:]):
            assert word != "a" or following[0] not in "aeiou", " ".join(src)
            assert word != "an" or following[0] in "aeiou", " ".join(src)


# Hand lexicon of anchor words: an English word and the French forms it can take.
ANCHORS = {
    "not": {"pas"}, "cat": {"chat"}, "cats": {"chats"}, "dog": {"chien"}, "dogs": {"chiens"},
    "car": {"voiture"}, "cars": {"voitures"}, "house": {"maison"}, "houses": {"maisons"},
    "apple": {"pomme"}, "apples": {"pommes"}, "red": {"rouge", "rouges"},
    "black": {"noir", "noire", "noirs", "noires"}, "green": {"vert", "verte", "verts", "vertes"},
    "eat": {"mange", "mangeons", "mangez", "mangent"}, "eats": {"mange"},
    "watch": {"regarde", "regardons", "regardez", "regardent"}, "watches": {"regarde"},
}


def anchor_order(src, tgt):
    """Target positions of the source anchors that occur once in both sentences, in source
    order."""
    positions = []
    for word in src:
        hits = [j for j, token in enumerate(tgt) if token in ANCHORS.get(word, ())]
        if src.count(word) == 1 and len(hits) == 1:
            positions.append(hits[0])
    return positions


def test_reordering_is_frequent_but_not_universal(corpus):
    orders = [anchor_order(src, tgt) for src, tgt in corpus.train]
    orders = [order for order in orders if len(order) >= 2]
    swapped = sum(order != sorted(order) for order in orders) / len(orders)
    assert len(orders) > 1000 and 0.15 < swapped < 0.9, (len(orders), swapped)
    assert anchor_order("i do not eat the red apples .".split(),
                        "je ne mange pas les pommes rouges .".split()) == [3, 2, 6, 5]


def test_most_pairs_hold_a_reordering_construction(corpus):
    """A colour or nationality (after the French noun), a negation or an object pronoun."""
    post = {"red", "black", "white", "green", "blue", "french", "italian"}
    markers = post | {"not", "me", "him", "her", "us", "them"}
    assert sum(bool(markers & set(src)) for src, _ in corpus.train) / len(corpus.train) > 0.6


@pytest.mark.parametrize("marker, minimum", [
    ("pas", 0.3), ("qui", 0.1), ("que", 0.1), ("qu'", 0.05), ("et", 0.2), ("mais", 0.1),
    ("l'", 0.1), ("n'", 0.1), ("de", 0.1), ("d'", 0.01), ("dans", 0.05), ("avec", 0.05),
    ("derrière", 0.05), ("cet", 0.05), ("mon", 0.1), ("bel", 0.05), ("vieil", 0.01),
])
def test_every_construction_is_common(corpus, marker, minimum):
    assert sum(marker in tgt for _, tgt in corpus.train) / len(corpus.train) > minimum
