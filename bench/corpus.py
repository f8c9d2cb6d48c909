"""A deterministic corpus of notebooks, notes, tags and to-dos for benchmarks.

``generate(n, seed)`` describes the corpus; notes are produced lazily by
``Corpus.iter_notes()`` (each from its own seeded generator), so 100,000 notes
never need to sit in memory at once and every run yields the same text.
``load(ws, corpus)`` writes it into a workspace in one transaction, through the
same tables and triggers as ordinary writes, so the keyword index is correct.

What it looks like (for n = 100,000, seed 0):

- ~n/200 notebooks nested up to four levels, titles from everyday topics;
- a few hundred tags, 0-5 per note with a skewed popularity;
- Markdown bodies with ATX and setext headings, lists, task lists, code fences,
  links and emphasis; ~3 % in Chinese, Japanese or Korean;
- lengths with a long tail: ~5 % single lines, median ~800 characters,
  ~0.1 % over 50,000 and a handful at 200,000;
- vocabulary per topic (cooking, gardening, software, travel, finance, health,
  home, reading) drawn with a Zipf-like skew, plus rare names and codes that
  occur in only a few notes, so searches have realistic selectivity;
- ~10 % to-dos (most with a due date, some completed), a few notes with a
  source URL, created and updated times spread over six years before
  ``Corpus.now_ms``.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from noteloom import db
from noteloom.workspace import Workspace

DAY_MS = 86_400_000
#: The corpus "now": a fixed instant (2026-06-01T00:00:00Z) so times are reproducible.
NOW_MS = 1_780_272_000_000
SPAN_MS = 6 * 365 * DAY_MS


def _wordlist(text: str) -> tuple[str, ...]:
    return tuple(text.split())


TOPICS: dict[str, str] = {
    "cooking": (
        "recipe sauce garlic onion butter flour oven bake roast simmer pasta rice bread dough "
        "yeast olive oil salt pepper lemon chicken beef pork tofu broth stock soup stew curry "
        "spice cumin paprika basil thyme rosemary parsley cilantro ginger chili tomato potato "
        "carrot celery mushroom cheese cream milk egg sugar honey vinegar mustard pan skillet "
        "knife cutting board marinade grill braise saute whisk fold knead proof crust filling "
        "dessert cake cookie pie tart pastry chocolate vanilla cinnamon breakfast lunch dinner "
        "leftovers serving portion minutes temperature caramelize ferment pickle kimchi miso "
        "sourdough focaccia risotto lasagna dumpling noodle ramen taco tortilla salsa avocado "
        "café crème brûlée jalapeño purée sauté flambé"
    ),
    "gardening": (
        "garden soil compost mulch seed seedling sprout transplant prune pruning water watering "
        "sunlight shade bed raised planter pot container tomato pepper squash zucchini cucumber "
        "lettuce kale spinach bean pea herb basil mint lavender rose tulip daffodil bulb "
        "perennial annual shrub hedge tree orchard apple pear plum cherry berry strawberry "
        "blueberry raspberry fertilizer nitrogen potassium aphid slug pest weed weeding hoe "
        "rake shovel trowel hose irrigation drip frost harvest bloom flower leaf root stem "
        "germinate greenhouse trellis vine grafting cutting propagate ph clay loam sand worm "
        "pollinator bee butterfly season spring summer autumn winter"
    ),
    "software": (
        "python rust typescript javascript golang java function class method module package "
        "library framework api endpoint request response json yaml database query index "
        "schema migration sqlite postgres table column transaction commit branch merge rebase "
        "pull review test pytest fixture mock coverage bug fix regression release deploy "
        "docker container kubernetes cluster server client cache latency throughput benchmark "
        "profile memory thread async await coroutine event loop socket http tls certificate "
        "token auth login session cookie config environment variable logging metrics trace "
        "refactor lint typing compiler build pipeline ci linux kernel shell script terminal "
        "editor vim emacs keyboard shortcut plugin extension dependency version upgrade"
    ),
    "travel": (
        "trip flight airport boarding gate passport visa hotel hostel booking reservation "
        "itinerary train station ticket bus ferry taxi rental car road map route luggage "
        "backpack suitcase packing list beach mountain hike trail museum cathedral castle "
        "market street food restaurant tip currency exchange cash card border customs "
        "jetlag timezone sightseeing tour guide island coast lake river valley village city "
        "capital old town harbor sunset sunrise camping tent weather forecast rain umbrella "
        "lisbon porto madrid barcelona paris lyon rome florence venice berlin munich vienna "
        "prague kyoto tokyo osaka seoul taipei hanoi bangkok zürich são paulo montréal"
    ),
    "finance": (
        "budget expense income salary invoice receipt tax return deduction refund account "
        "bank savings checking credit debit card loan mortgage interest rate payment rent "
        "utility bill insurance premium policy claim pension retirement fund portfolio stock "
        "bond etf dividend yield inflation spending category monthly annual quarterly report "
        "balance statement transfer fee subscription cancel renew contract quote estimate "
        "price cost discount purchase order vendor supplier accountant audit spreadsheet "
        "ledger currency euro dollar pound franc emergency goal net worth allocation"
    ),
    "health": (
        "doctor appointment clinic hospital dentist checkup prescription medication dose "
        "allergy vaccine blood pressure heart rate sleep insomnia nap exercise workout run "
        "running walk walking swim cycling yoga stretch strength squat deadlift plank cardio "
        "calorie protein carbohydrate fiber vitamin hydration diet meal plan weight injury "
        "knee back shoulder physio therapy recovery rest stress anxiety meditation breathing "
        "journal mood energy symptom fever cough cold flu headache migraine test result "
        "cholesterol glucose posture steps habit routine"
    ),
    "home": (
        "kitchen bathroom bedroom living room garage basement attic roof gutter window door "
        "lock key paint wall floor tile carpet furniture sofa table chair shelf closet "
        "storage cleaning laundry vacuum dishwasher fridge freezer boiler heating radiator "
        "thermostat insulation leak plumber electrician repair fix install replace bulb lamp "
        "wiring fuse router wifi printer move moving box landlord lease neighbor recycling "
        "trash compost chores schedule groceries shopping list hardware drill screw nail"
    ),
    "reading": (
        "book novel chapter author page quote highlight summary review essay poem poetry "
        "fiction nonfiction history biography memoir science philosophy economics psychology "
        "mystery thriller fantasy library borrow return kindle paperback hardcover series "
        "character plot theme argument thesis evidence footnote citation publisher edition "
        "translation reread recommendation bookclub discussion notes idea insight lesson "
        "kafka tolstoy dostoevsky austen orwell borges calvino woolf murakami le guin"
    ),
}

FUNCTION_WORDS = _wordlist(
    "the the the the and and and of of of to to to a a a in in is is for for with on on "
    "it that this be was are as at by from or not but we you i my our will can should "
    "have has had do does did so if then than when what which who how why about into "
    "over after before again more most some any all each every no very just also only "
    "new old next last first good better best small large big little long short"
)

GENERAL_WORDS = _wordlist(
    "today tomorrow yesterday week month year morning evening weekend monday tuesday "
    "wednesday thursday friday saturday sunday plan idea note todo follow up check call "
    "email send buy order book ask remember try start finish update review draft final "
    "important urgent later maybe question answer problem solution reason result example "
    "detail list step option choice change issue thing place people family friend work "
    "project team meeting deadline time number price cost size part area group point "
    "family weekend holiday birthday gift party photo video music movie game"
)

ACTIONS = (
    "Remember to", "Try", "Check", "Buy", "Call about", "Look into", "Finish", "Review",
    "Fix", "Plan", "Book", "Compare", "Order", "Clean", "Update", "Schedule",
)

TITLE_SHAPES = (
    "{w1} {w2}", "{w1} and {w2}", "Notes on {w1}", "{w1} {w2} {w3}", "How to {w1} {w2}",
    "{W1} ideas", "{W1} checklist", "{W1} log {year}", "Weekly {w1}", "{W1}: {w2} {w3}",
)

NOTEBOOK_NAMES = (
    "Inbox", "Archive", "Projects", "Personal", "Work", "Ideas", "Journal", "Reference",
    "Someday", "Family", "Household", "Learning", "Clippings", "Meetings", "Research",
)

CJK_SENTENCES: dict[str, tuple[str, ...]] = {
    "zh": (
        "今天我们去市场买了新鲜的蔬菜和水果。",
        "这个周末计划去山里徒步旅行，记得带雨伞。",
        "红烧肉需要用小火慢慢炖一个小时左右。",
        "花园里的番茄已经开始变红了，可以收获了。",
        "数据库迁移之前一定要先备份所有笔记。",
        "下个月的预算要控制在五千元以内。",
        "医生建议每天散步三十分钟，保持良好的睡眠。",
        "这本小说的结局让人意想不到，值得再读一遍。",
        "搜索功能应该支持中文分词和拼音输入。",
        "旅行的时候别忘了带护照和充电器。",
    ),
    "ja": (
        "今日は駅の近くの喫茶店でコーヒーを飲みました。",
        "週末に京都へ旅行する予定です。新幹線の切符を予約しました。",
        "味噌汁の作り方を母に教えてもらった。",
        "庭のトマトがたくさん実をつけています。",
        "会議の議事録をまとめて、チームに共有してください。",
        "毎朝ジョギングをして、健康に気をつけています。",
        "この本の第三章はとても面白かった。",
        "来月の家賃と光熱費を払うのを忘れないこと。",
        "検索機能のテストを追加する必要があります。",
        "東京の美術館で素晴らしい展覧会を見ました。",
    ),
    "ko": (
        "오늘 시장에서 신선한 채소를 샀어요.",
        "주말에 부산으로 여행을 갈 계획입니다.",
        "김치찌개를 끓이는 방법을 정리해 두었다.",
        "정원에 토마토와 고추를 심었습니다.",
        "회의록을 정리해서 팀에 공유해 주세요.",
        "매일 아침 운동을 하고 물을 많이 마십니다.",
        "이 책은 정말 재미있어서 다시 읽고 싶다.",
        "다음 달 예산을 미리 계획해야 합니다.",
        "검색 기능에 한국어 지원을 추가했습니다.",
        "서울의 박물관에서 멋진 전시회를 봤어요.",
    ),
}

CJK_HEADINGS: dict[str, tuple[str, ...]] = {
    "zh": ("准备", "步骤", "注意事项", "总结", "计划"),
    "ja": ("準備", "手順", "注意点", "まとめ", "予定"),
    "ko": ("준비", "단계", "주의 사항", "요약", "계획"),
}

CODE_SNIPPETS = (
    ("python", "def load(path):\n    with open(path) as f:\n        return json.load(f)\n"),
    ("python", "for item in items:\n    if item.done:\n        continue\n    print(item.title)\n"),
    ("bash", "# install dependencies\npip install -r requirements.txt\npytest -q\n"),
    ("sql", "SELECT id, title FROM notes WHERE updated_time > ? ORDER BY updated_time DESC;\n"),
    ("yaml", "server:\n  port: 8080\n  workers: 4\n# cache settings\ncache:\n  ttl: 300\n"),
    ("", "$ git log --oneline | head\n$ git rebase -i HEAD~3\n"),
)

_SYLLABLES = (
    "ka", "lo", "mi", "ren", "tor", "vax", "quin", "bel", "dra", "sul", "mor", "zen",
    "pha", "gri", "nov", "tek", "lum", "sar", "ox", "vel", "dun", "cor", "ith", "yal",
)


@dataclass(frozen=True)
class CorpusNotebook:
    id: str
    parent_id: str | None
    title: str
    created_time: int


@dataclass(frozen=True)
class CorpusNote:
    id: str
    notebook_id: str
    title: str
    body: str
    is_todo: bool
    todo_due: int | None
    todo_completed: int | None
    source_url: str
    created_time: int
    updated_time: int
    tags: tuple[str, ...]
    topic: str
    lang: str  # "en", "zh", "ja" or "ko"


@dataclass(frozen=True)
class Corpus:
    """A corpus description; notes are generated on demand by :meth:`iter_notes`."""

    n: int
    seed: int
    notebooks: tuple[CorpusNotebook, ...]
    tags: tuple[str, ...]
    pools: _Pools = field(repr=False, compare=False)
    now_ms: int = NOW_MS

    def iter_notes(self, start: int = 0, stop: int | None = None) -> Iterator[CorpusNote]:
        """Notes ``start`` … ``stop - 1`` (all by default), each the same on every run."""
        for i in range(start, self.n if stop is None else min(stop, self.n)):
            yield self.note(i)

    def note(self, i: int) -> CorpusNote:
        """Note number ``i``."""
        return _make_note(self, i)

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(TOPICS)

    def notebook_titles(self) -> list[str]:
        return [b.title for b in self.notebooks]


@dataclass(frozen=True)
class _Pools:
    """Pre-built sentences and vocabulary shared by every note of a corpus."""

    sentences: dict[str, tuple[str, ...]]  # per topic
    topic_words: dict[str, tuple[str, ...]]
    rare_words: tuple[str, ...]
    tag_cum: tuple[float, ...]
    notebooks_by_topic: dict[str, tuple[str, ...]]


def generate(n: int, seed: int = 0) -> Corpus:
    """The corpus of ``n`` notes for ``seed``: notebooks and tags now, notes on demand."""
    if n < 0:
        raise ValueError(f"n must be >= 0, not {n}")
    rng = random.Random(f"corpus:{seed}")
    notebooks = _make_notebooks(rng, max(3, n // 200))
    tags = _make_tags(rng, 300 if n >= 2000 else max(20, n // 7))
    pools = _make_pools(rng, notebooks, tags)
    return Corpus(n, seed, tuple(notebooks), tuple(tags), pools)


def load(ws: Workspace, corpus: Corpus, *, batch: int = 1000) -> None:
    """Insert the whole corpus in ONE write transaction, through the ordinary tables
    (so the keyword index triggers and the change feed see every note)."""
    tag_ids = {title: _hex_id(corpus.seed, "tag", i) for i, title in enumerate(corpus.tags)}
    with ws.write() as conn:
        conn.execute(
            db.notebooks.insert(),
            [
                {
                    "id": b.id,
                    "parent_id": b.parent_id,
                    "title": b.title,
                    "created_time": b.created_time,
                    "updated_time": b.created_time,
                }
                for b in corpus.notebooks
            ],
        )
        if tag_ids:
            conn.execute(
                db.tags.insert(),
                [
                    {
                        "id": tid,
                        "title": title,
                        "title_key": title.lower(),
                        "created_time": corpus.now_ms - SPAN_MS,
                        "updated_time": corpus.now_ms - SPAN_MS,
                    }
                    for title, tid in tag_ids.items()
                ],
            )
        notes = corpus.iter_notes()
        while True:
            chunk = list(itertools.islice(notes, batch))
            if not chunk:
                break
            conn.execute(
                db.notes.insert(),
                [
                    {
                        "id": x.id,
                        "notebook_id": x.notebook_id,
                        "title": x.title,
                        "body": x.body,
                        "is_todo": x.is_todo,
                        "todo_due": x.todo_due,
                        "todo_completed": x.todo_completed,
                        "source_url": x.source_url,
                        "created_time": x.created_time,
                        "updated_time": x.updated_time,
                    }
                    for x in chunk
                ],
            )
            links = [
                {"note_id": x.id, "tag_id": tag_ids[t], "created_time": x.created_time}
                for x in chunk
                for t in x.tags
            ]
            if links:
                conn.execute(db.note_tags.insert(), links)
            conn.execute(
                db.note_changes.insert(),
                [{"note_id": x.id, "kind": "create", "time": x.created_time} for x in chunk],
            )


# -- building blocks ------------------------------------------------------------------


def _hex_id(seed: int, kind: str, i: int) -> str:
    """A stable 32-hex id, distinct per (seed, kind, i)."""
    return random.Random(f"{kind}:{seed}:{i}").getrandbits(128).to_bytes(16, "big").hex()


def _make_notebooks(rng: random.Random, count: int) -> list[CorpusNotebook]:
    topics = list(TOPICS)
    out: list[CorpusNotebook] = []
    depth: dict[str, int] = {}
    used: dict[str, int] = {}
    for i in range(count):
        nid = _hex_id(rng.randrange(1 << 30), "notebook", i)
        parent: CorpusNotebook | None = None
        if i >= len(topics) and rng.random() < 0.8:
            candidates = [b for b in out[-60:] if depth[b.id] < 3]
            parent = rng.choice(candidates) if candidates else None
        if i < len(topics):
            base = topics[i].capitalize()
        elif rng.random() < 0.5:
            base = rng.choice(NOTEBOOK_NAMES)
        else:
            topic = rng.choice(topics)
            base = f"{rng.choice(TOPICS[topic].split()).capitalize()} {rng.choice(('notes', 'log', 'plans', str(2019 + rng.randrange(8))))}"
        used[base] = used.get(base, 0) + 1
        title = base if used[base] == 1 else f"{base} {used[base]}"
        created = NOW_MS - SPAN_MS - rng.randrange(30 * DAY_MS)
        out.append(CorpusNotebook(nid, parent.id if parent else None, title, created))
        depth[nid] = depth[parent.id] + 1 if parent else 0
    return out


def _make_tags(rng: random.Random, count: int) -> list[str]:
    words = sorted({w for text in TOPICS.values() for w in text.split() if w.isascii()})
    fixed = ["important", "urgent", "to-read", "someday", "waiting", "idea", "reference",
             "2022", "2023", "2024", "2025", "work", "personal", "family", "done"]
    out: list[str] = []
    seen: set[str] = set()
    for t in fixed + rng.sample(words, len(words)):
        if len(out) >= count:
            break
        if t not in seen:
            seen.add(t)
            out.append(t)
    i = 0
    while len(out) < count:
        t = f"project-{_syllable_word(rng)}-{i}"
        i += 1
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


def _syllable_word(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))


def _zipf_pick(rng: random.Random, items: Sequence[str]) -> str:
    """An item with a Zipf-like skew: the first items are by far the most common."""
    # Inverse of the continuous approximation of the Zipf CDF: fast and good enough.
    n = len(items)
    idx = int(math.exp(rng.random() * math.log(n + 1))) - 1
    return items[min(max(idx, 0), n - 1)]


def _make_pools(rng: random.Random, notebooks: list[CorpusNotebook], tags: list[str]) -> _Pools:
    topic_words: dict[str, tuple[str, ...]] = {}
    sentences: dict[str, tuple[str, ...]] = {}
    for topic, text in TOPICS.items():
        words = text.split()
        rng.shuffle(words)  # which words are common is part of the seed
        topic_words[topic] = tuple(words)
        pool = []
        for _ in range(700):
            length = rng.randint(5, 18)
            parts = []
            for _ in range(length):
                r = rng.random()
                if r < 0.42:
                    parts.append(rng.choice(FUNCTION_WORDS))
                elif r < 0.85:
                    parts.append(_zipf_pick(rng, words))
                else:
                    parts.append(_zipf_pick(rng, GENERAL_WORDS))
            s = " ".join(parts)
            if rng.random() < 0.12:  # inline markup
                w = rng.choice(parts)
                s = s.replace(w, rng.choice(("**{}**", "*{}*", "`{}`")).format(w), 1)
            s = s[0].upper() + s[1:] + rng.choice((".", ".", ".", "!", "?", ":"))
            pool.append(s)
        sentences[topic] = tuple(pool)
    rare = tuple(sorted({_syllable_word(rng) for _ in range(25_000)}))
    weights = [1.0 / (i + 1) ** 0.9 for i in range(len(tags))]
    total = sum(weights)
    cum = tuple(itertools.accumulate(w / total for w in weights))
    by_topic: dict[str, list[str]] = {t: [] for t in TOPICS}
    topics = list(TOPICS)
    for i, b in enumerate(notebooks):
        by_topic[topics[i % len(topics)]].append(b.id)
    return _Pools(sentences, topic_words, rare, cum, {k: tuple(v) for k, v in by_topic.items()})


def _target_length(rng: random.Random, i: int, n: int) -> int:
    # A handful of notes at the ceiling, spread over the corpus.
    if n >= 1000 and i % (n // 5) == 7:
        return 200_000
    r = rng.random()
    if r < 0.05:
        return 0  # a single line
    if r < 0.051:
        return int(math.exp(rng.uniform(math.log(50_000), math.log(200_000))))
    if r < 0.066:
        return int(math.exp(rng.uniform(math.log(8_000), math.log(50_000))))
    return max(60, min(50_000, int(rng.lognormvariate(math.log(780), 0.95))))


def _make_note(corpus: Corpus, i: int) -> CorpusNote:
    pools = corpus.pools
    rng = random.Random(f"note:{corpus.seed}:{i}")
    topic = rng.choice(tuple(TOPICS))
    lang = "en"
    if rng.random() < 0.03:
        lang = rng.choice(("zh", "ja", "ko"))
    words = pools.topic_words[topic]
    title = _title(rng, topic, words, lang)
    target = _target_length(rng, i, corpus.n)
    body = _body(rng, pools, topic, lang, target)

    created = corpus.now_ms - rng.randrange(DAY_MS, SPAN_MS)
    updated = created if rng.random() < 0.4 else min(corpus.now_ms, created + rng.randrange(365 * DAY_MS))
    is_todo = rng.random() < 0.10
    due = done = None
    if is_todo:
        if rng.random() < 0.6:
            due = created + rng.randrange(DAY_MS, 120 * DAY_MS)
        if rng.random() < 0.4:
            done = min(corpus.now_ms, created + rng.randrange(DAY_MS, 200 * DAY_MS))
        if target == 0:
            title = f"{rng.choice(ACTIONS)} {_zipf_pick(rng, words)}"
    source_url = ""
    if rng.random() < 0.02:
        source_url = f"https://{rng.choice(('example.org', 'blog.example.com', 'news.example.net'))}/{topic}/{_zipf_pick(rng, words)}-{rng.randrange(10_000)}"
    tags: list[str] = []
    for _ in range(min(5, int(rng.expovariate(0.8)))):
        t = corpus.tags[min(bisect.bisect_left(pools.tag_cum, rng.random()), len(corpus.tags) - 1)]
        if t not in tags:
            tags.append(t)
    notebooks = pools.notebooks_by_topic[topic] or tuple(b.id for b in corpus.notebooks)
    notebook_id = notebooks[min(int(rng.expovariate(0.15)), len(notebooks) - 1)]
    return CorpusNote(
        id=_hex_id(corpus.seed, "note", i),
        notebook_id=notebook_id,
        title=title,
        body=body,
        is_todo=is_todo,
        todo_due=due,
        todo_completed=done,
        source_url=source_url,
        created_time=created,
        updated_time=updated,
        tags=tuple(tags),
        topic=topic,
        lang=lang,
    )


def _title(rng: random.Random, topic: str, words: Sequence[str], lang: str) -> str:
    if lang != "en":
        s = rng.choice(CJK_SENTENCES[lang])
        return s[: rng.randint(4, 10)].rstrip("。.、，, ")
    w = [_zipf_pick(rng, words) for _ in range(3)]
    shape = rng.choice(TITLE_SHAPES)
    return shape.format(
        w1=w[0], w2=w[1], w3=w[2], W1=w[0].capitalize(), year=2020 + rng.randrange(7)
    ).capitalize()


def _paragraph(rng: random.Random, pools: _Pools, topic: str, lang: str, sentences: int) -> str:
    if lang != "en":
        own = CJK_SENTENCES[lang]
        parts = [rng.choice(own) for _ in range(sentences)]
        if rng.random() < 0.3:  # mixed-script notes are common
            parts.insert(rng.randrange(len(parts) + 1), rng.choice(pools.sentences[topic]))
        return ("" if lang in ("zh", "ja") else " ").join(parts)
    pool = pools.sentences[topic]
    parts = [rng.choice(pool) for _ in range(sentences)]
    if rng.random() < 0.3:
        k = rng.randrange(len(parts))
        parts[k] = f"{parts[k][:-1]} {rng.choice(pools.rare_words)}{parts[k][-1]}"
    if rng.random() < 0.1:
        w = _zipf_pick(rng, pools.topic_words[topic])
        parts.append(f"See [{w}](https://example.org/{topic}/{w}) for more.")
    return " ".join(parts)


def _heading(rng: random.Random, pools: _Pools, topic: str, lang: str, level: int) -> str:
    if lang != "en":
        text = rng.choice(CJK_HEADINGS[lang])
    else:
        ws = pools.topic_words[topic]
        text = " ".join(_zipf_pick(rng, ws) for _ in range(rng.randint(1, 3))).capitalize()
    if level <= 2 and rng.random() < 0.2:
        return f"{text}\n{('=' if level == 1 else '-') * max(3, len(text))}"
    return f"{'#' * level} {text}"


def _block(rng: random.Random, pools: _Pools, topic: str, lang: str) -> str:
    r = rng.random()
    if r < 0.6:
        return _paragraph(rng, pools, topic, lang, rng.randint(1, 6))
    if r < 0.8:
        marker = rng.choice(("-", "*", "1.", "- [ ]", "- [x]"))
        items = []
        for k in range(rng.randint(2, 7)):
            m = f"{k + 1}." if marker == "1." else marker
            if marker == "- [ ]" and rng.random() < 0.3:
                m = "- [x]"
            items.append(f"{m} {_paragraph(rng, pools, topic, lang, 1)}")
            if rng.random() < 0.15:
                items.append(f"    - {_paragraph(rng, pools, topic, lang, 1)}")
        return "\n".join(items)
    if r < 0.9 and (topic == "software" or rng.random() < 0.2):
        lang_tag, code = rng.choice(CODE_SNIPPETS)
        return f"```{lang_tag}\n{code}```"
    if r < 0.95:
        return "> " + _paragraph(rng, pools, topic, lang, rng.randint(1, 2))
    ws = pools.topic_words[topic]
    rows = ["| item | note |", "| --- | --- |"]
    rows += [f"| {_zipf_pick(rng, ws)} | {_zipf_pick(rng, ws)} {rng.randrange(100)} |" for _ in range(rng.randint(2, 5))]
    return "\n".join(rows)


def _body(rng: random.Random, pools: _Pools, topic: str, lang: str, target: int) -> str:
    if target == 0:
        return _paragraph(rng, pools, topic, lang, 1)
    blocks: list[str] = []
    size = 0
    level = 0
    headed = rng.random() < 0.75 and target > 300
    while size < target:
        if headed and (not blocks or rng.random() < 0.22):
            level = min(max(1, level + rng.choice((-1, 0, 1, 1))), 4)
            block = _heading(rng, pools, topic, lang, level)
        else:
            block = _block(rng, pools, topic, lang)
        blocks.append(block)
        size += len(block) + 2
    text = "\n\n".join(blocks)
    return text[: max(target, 40)] if len(text) > target * 1.5 else text


def summary(corpus: Corpus) -> dict[str, Any]:
    """Length and shape figures of ``corpus`` (generates every note once)."""
    lengths: list[int] = []
    langs: dict[str, int] = {}
    todos = due = tagged = 0
    for x in corpus.iter_notes():
        lengths.append(len(x.body))
        langs[x.lang] = langs.get(x.lang, 0) + 1
        todos += x.is_todo
        due += x.todo_due is not None
        tagged += bool(x.tags)
    lengths.sort()
    n = max(1, len(lengths))
    return {
        "notes": len(lengths),
        "notebooks": len(corpus.notebooks),
        "tags": len(corpus.tags),
        "median_chars": lengths[n // 2] if lengths else 0,
        "mean_chars": sum(lengths) // n,
        "over_50k": sum(1 for v in lengths if v > 50_000),
        "at_200k": sum(1 for v in lengths if v >= 199_000),
        "max_chars": lengths[-1] if lengths else 0,
        "langs": langs,
        "todos": todos,
        "todos_with_due": due,
        "tagged": tagged,
    }


def main() -> None:
    """Print the shape of the default corpus and how long generating it takes."""
    import sys
    import time

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    t0 = time.perf_counter()
    corpus = generate(n)
    figures = summary(corpus)
    print(f"generated {n} notes in {time.perf_counter() - t0:.1f} s")
    for k, v in figures.items():
        print(f"  {k}: {v}")


if __name__ == "__main__":
    main()
