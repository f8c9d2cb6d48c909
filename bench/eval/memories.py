"""A deterministic memory set and the messages that need it, for ``bench/bench_memory.py``.

``generate(personal, shared, messages, seed)`` builds, from templates and a fixed seed:

- personal memories of one user: allergies, preferences, birthdays, people at work,
  project facts, home and travel details, and some long bodies (meeting notes, project
  background, 2,000-9,000 characters);
- shared memories of the workspace: policies per team, house style, office facts;
- messages, each with the id of its right memory. Half share a salient word with it
  (a name, a project's code name, a policy's subject); half share none: they ask about
  the fact in other words ("a prawn curry" for a shellfish allergy), so only the title
  index, or meaning, can bring the memory to the model.

"Salient word" is this module's own definition (``words``: lowercase words of three
letters or more, English stop words dropped), not the product's; every message is
checked against it, so the split is what it says it is. Running it twice gives the same set.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

_STOP_TEXT = """
a about above after again against all am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here hers
herself him himself his how i if in into is it its itself just let me more most my myself no nor not now of off
on once only or other our ours ourselves out over own same she should so some such than that the their theirs
them themselves then there these they this those through to too under until up very was we were what when where
which while who whom why will with would you your yours yourself yourselves also any anything ever get got
give go going know like make may might much must need new one please really said say see should still take tell
thing think two use want way well what whats would yes yet next last time day days week weeks year years any
"""
STOP = frozenset(_STOP_TEXT.split())


def words(text: str) -> set[str]:
    """The salient words of ``text`` as this evaluation counts them."""
    return {w for w in re.findall(r"[^\W_]+", text.lower()) if len(w) >= 3 and w not in STOP}


@dataclass(frozen=True)
class Mem:
    key: str
    scope: str  # personal | shared
    title: str
    content: str
    tags: tuple[str, ...]
    #: Milliseconds; later is more recent.
    updated: int


@dataclass(frozen=True)
class Ask:
    text: str
    right: str  # the key of the right memory
    shares_word: bool


@dataclass(frozen=True)
class MemorySet:
    memories: list[Mem]
    messages: list[Ask]


FIRST = ["Maya", "Tom", "Priya", "Jonas", "Aiko", "Lucas", "Fatima", "Oren", "Greta", "Mateo", "Nadia", "Kwame",
         "Ingrid", "Rafael", "Sunita", "Dmitri", "Elena", "Tariq", "Chloe", "Bjorn", "Amara", "Hiro", "Leila", "Pavel",
         "Zoe", "Emeka", "Rosa", "Felix", "Yuki", "Anders", "Camila", "Idris", "Hannah", "Marco", "Noor", "Stefan"]
LAST = ["Okafor", "Lindqvist", "Raman", "Moreau", "Tanaka", "Schmidt", "Haddad", "Novak", "Silva", "Kowalski",
        "Brennan", "Adeyemi", "Rossi", "Vargas", "Nakamura", "Petrov", "Dubois", "Hansen", "Mehta", "Castillo"]
PROJECTS = ["Basalt", "Heron", "Juniper", "Quartz", "Marigold", "Falcon", "Tundra", "Saffron", "Obsidian", "Willow",
            "Cobalt", "Lantern", "Orchid", "Granite", "Pelican", "Sequoia", "Topaz", "Nimbus", "Harbor", "Vesper",
            "Aurora", "Bramble", "Cypress", "Dynamo", "Ember", "Fjord", "Galena", "Hemlock", "Indigo", "Jasper"]
COMPANIES = ["Northwind", "Acme Logistics", "Bluefin Analytics", "Copperleaf", "Driftwood Media", "Evergreen Health",
             "Foxglove Labs", "Greystone Bank", "Hollow Oak Studio", "Ironbridge Legal", "Kestrel Freight"]
ROLES = ["finance lead", "product manager", "head of support", "staff engineer", "procurement officer",
         "account manager", "design director", "data analyst", "legal counsel", "operations manager"]
CITIES = ["Lisbon", "Osaka", "Toronto", "Nairobi", "Krakow", "Valparaiso", "Tallinn", "Brisbane", "Lyon", "Montreal"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
GIFTS = ["fountain pens", "jigsaw puzzles", "single-origin coffee", "vinyl records", "board games", "orchids",
         "climbing gear", "watercolour paints", "crime novels", "hot sauce"]
ASPECTS = [
    ("deadline", "The {p} milestone review is on {d} {m}; the launch slips if the payment integration is late."),
    ("stack", "{p} runs on Django with PostgreSQL 16, deployed on Fly.io; the frontend is SvelteKit."),
    ("owner", "{p} is owned by {n}; escalations go to {n2} when {n} is away."),
    ("budget", "{p} has a budget of {k} thousand euros for this quarter, tracked in the finance sheet."),
    ("client", "{p} is built for {c}; their contact insists on a demo every second {w}."),
    ("repository", "The {p} code lives in the monorepo under services/{pl}; CI takes about {k} minutes."),
    ("standup", "The {p} standup is at 9:15 every {w} in the small room; notes go in the shared channel."),
    ("risks", "Biggest {p} risk: the vendor API rate limits at {k} requests per minute during peak."),
]
PREFERENCES = [
    ("seat", "{n} always wants an aisle seat on flights and never the last row."),
    ("coffee", "{n} takes oat milk in coffee and no sugar."),
    ("meetings", "{n} prefers meetings before 10 in the morning and blocks Friday afternoons."),
    ("contact", "{n} answers email within a day but ignores phone calls from unknown numbers."),
    ("diet", "{n} is vegetarian and avoids mushrooms."),
    ("music", "{n} listens to jazz while working; loud offices bother {n} a lot."),
    ("travel", "{n} takes trains instead of planes for anything under five hours."),
]
HOME = [
    ("Boiler service", "The boiler is serviced every {m} by {n} from {c}; the model is a Vaillant ecoTEC plus."),
    ("Car insurance", "The car insurance renews in {m}; the policy is with {c} and covers a courtesy car."),
    ("Passport", "My passport expires in {m} {y}; renewal takes about six weeks, so start early."),
    ("Dentist", "The dentist is Dr {n} on Harbour Street; check-ups every six months, next one in {m}."),
    ("Bike lock", "The bike lock code is stored in the password manager, not here; the frame number is WTU{k}."),
    ("Gym membership", "The gym membership renews on the 1st of {m}; the off-peak plan is cheaper."),
    ("Plants", "The fiddle-leaf fig gets water every {w}; the orchids only once a fortnight."),
]
POLICIES = [
    ("Refund policy", "Refunds are honoured within {k} days of purchase with the receipt; after that, store credit only."),
    ("Travel policy", "Economy class for flights under six hours; book through the travel desk at least two weeks ahead."),
    ("Expense limits", "Meals on business trips are reimbursed up to {k} euros a day; alcohol is never reimbursed."),
    ("Laptop security", "Every laptop must have full-disk encryption and lock after five minutes idle."),
    ("House style", "Write in British English with the Oxford comma; headings in sentence case."),
    ("On-call rotation", "On-call rotates weekly on {w}; the handover note goes in the incident channel."),
    ("Office hours", "The office is open from 8 to 19 on weekdays; badges stop working at 20."),
    ("Parental leave", "Parental leave is {k} weeks at full pay for every parent, to be taken within two years."),
    ("Code review", "Every change needs one approving review; changes to billing need two."),
    ("Data retention", "Customer support tickets are deleted {k} months after they are closed."),
]
TEAMS = ["Sales", "Support", "Engineering", "Finance", "Design", "Marketing", "Legal", "Operations", "People", "Research"]
FILLER = [
    "We went through the open questions one by one and agreed to revisit the ones without an owner next week.",
    "The discussion about scope took longer than planned; everyone agreed the first release should stay small.",
    "Several people raised the point that the documentation lags behind the code and should be part of done.",
    "There was a long digression about naming, which ended with a decision to keep the current names for now.",
    "The numbers from the last quarter were reviewed; growth is steady but the churn in small accounts worries us.",
    "Action items were assigned and written into the tracker so that nothing depends on anyone's memory.",
    "We compared three vendors on price, support hours and data residency before shortlisting two of them.",
    "The retrospective surfaced friction in the handover between design and engineering, mostly about timing.",
]

#: Facts that a message can only reach by meaning: the memory, then two messages sharing no word with it.
HIDDEN = [
    ("personal", "Shellfish allergy (Maya)", "Maya is allergic to shellfish: no prawns, crab or lobster. She carries an EpiPen.",
     ["Planning a seafood paella for the family dinner on Sunday, ideas?", "Which restaurant by the harbour serves good scampi?"]),
    ("personal", "Peanut allergy (Jonas)", "Jonas reacts badly to peanuts, including peanut oil and satay.",
     ["Thai takeaway tonight for the flatmates — order suggestions?", "Give me a recipe for a groundnut stew to share."]),
    ("personal", "Penicillin reaction", "I had a rash and swelling after penicillin in 2019; the doctor said to avoid it.",
     ["The GP wants to prescribe amoxicillin for my ear infection, anything to mention?", "What antibiotics usually treat strep throat?"]),
    ("personal", "Lactose intolerance", "I'm lactose intolerant: cheese, cream and milk upset my stomach; oat milk is fine.",
     ["Suggest a fondue evening menu for six.", "Best gelato places in Florence?"]),
    ("personal", "Hay fever", "Hay fever from birch pollen is worst in April and May; antihistamines help.",
     ["Is spring a good season for a hiking trip in Bavaria?", "Planning a picnic in the park for early blossoms, tips?"]),
    ("personal", "Fear of flying", "Flying makes me very anxious; I prefer trains and ferries whenever possible.",
     ["Best way to get from London to Barcelona for the conference?", "Book me the quickest route to Rome next month."]),
    ("personal", "Vegetarian household", "Nobody at home eats meat; we cook vegetarian and sometimes vegan.",
     ["Plan a barbecue menu for the garden party.", "Which steakhouse downtown would you recommend for a family lunch?"]),
    ("personal", "Sister's wedding date", "Ana gets married on 14 September in Porto; the reception starts at 18:00.",
     ["Can I take the team offsite in mid-autumn, around the second week?", "Draft an out-of-office message for my sibling's big celebration."]),
    ("personal", "Standing desk setup", "My desk is set to 108 cm standing and 72 cm sitting; the monitor arm is on the left.",
     ["My back hurts after long workdays, what should I adjust?", "Write an ergonomics checklist for the home office."]),
    ("personal", "Night owl", "I do my best thinking after 21:00 and struggle with early starts.",
     ["When should I schedule the deep-work blocks for the report?", "Set up a morning routine that could work."]),
    ("personal", "Dog walker", "Lena walks Biscuit at noon on weekdays; her number is in the contacts app.",
     ["Who looks after the puppy during the workday?", "I'm away Tuesday to Friday — what about my pet?"]),
    ("personal", "Spanish lessons", "I take Spanish lessons with Carmen on Thursday evenings, level B1.",
     ["Could you quiz me on irregular verbs in castellano?", "What podcasts help with a foreign language for an improver?"]),
    ("personal", "Migraine triggers", "Red wine and skipped meals trigger my migraines; bright screens make them worse.",
     ["Suggest drinks for the tasting evening at the vineyard.", "My head is pounding after the long flight, what helps?"]),
    ("personal", "Marathon training", "Training for the Berlin marathon: long runs on Sundays, target under 4 hours.",
     ["Plan my weekend so I still get enough rest before the race.", "What should I eat the evening before a 42 km effort?"]),
    ("personal", "Mortgage fixed rate", "The mortgage rate is fixed at 3.1 % until March 2027, with Greystone.",
     ["Should I worry about the central bank raising interest?", "When does our home loan deal end?"]),
    ("personal", "Colour blindness", "I have red-green colour blindness: charts need patterns or labels, not only colours.",
     ["Make the sales graph for the quarterly slides.", "Pick a palette for the dashboard."]),
    ("personal", "Kid's school pickup", "Noah finishes school at 15:10 on weekdays; Wednesdays at 13:00.",
     ["Can I accept a call at 3 pm on a weekday?", "Find a slot for the dentist that fits around my son."]),
    ("personal", "Insulin pump", "I wear an insulin pump; airport scanners need a manual check instead.",
     ["Anything to prepare before going through security for my flight?", "Packing list for a week in Japan."]),
    ("personal", "Preferred pronouns", "Alex uses they/them pronouns; please use those in drafts.",
     ["Write an introduction for our new colleague for the newsletter.", "Draft a thank-you note to Sam's partner."]),
    ("personal", "Quiet hours", "No messages to me between 22:00 and 7:00; urgent things go to the on-call phone.",
     ["Schedule the reminder emails for the nightly batch.", "When is it fine to ping me about deployments?"]),
    ("personal", "Favourite bakery", "Favourite bakery: Panadería Sol on Rua Augusta, their cardamom buns.",
     ["Where should I pick up pastries for Saturday morning?", "Recommend breakfast spots in the old town."]),
    ("personal", "Car is electric", "The car is an electric Kia Niro; range about 400 km, charges overnight at home.",
     ["Plan a road trip from Munich to Vienna.", "Is the motorway service station stop needed on a long drive?"]),
    ("personal", "Budget for gifts", "Keep presents under 50 euros per person this year.",
     ["Ideas for what to buy my nieces for the holidays?", "Christmas shopping list for the team, please."]),
    ("personal", "Knee injury", "Torn meniscus in the left knee: no running downhill, cycling is fine.",
     ["Suggest a mountain trek for the long weekend.", "Which sports could I pick up this summer?"]),
    ("personal", "Coffee cut-off", "No caffeine after 14:00 or I can't sleep.",
     ["What should I order at the café during the afternoon meeting?", "An espresso at 5 pm, good idea?"]),
    ("personal", "Landlord contact", "The landlord is Mr Ferreira; repairs are requested in writing with photos.",
     ["The kitchen tap is leaking, how do I get it fixed?", "Who do I tell that the heating broke in the flat?"]),
    ("personal", "Gluten-free partner", "Sam has coeliac disease: strictly gluten-free, including soy sauce.",
     ["Pick a pizzeria for our anniversary dinner.", "Bake something for the weekend — a sourdough loaf?"]),
    ("personal", "Cat sitter", "When travelling, Ines feeds the cats twice a day; keys are with the concierge.",
     ["I'm flying out Thursday; who handles the kittens?", "Checklist before leaving home for a fortnight."]),
    ("personal", "Reading goal", "Goal this year: 24 books, at least half non-fiction.",
     ["Recommend something for the holiday beach bag.", "How am I doing on my novels and biographies count?"]),
    ("personal", "Bank appointment", "Meeting with the bank adviser about the savings plan on the first Monday of each quarter.",
     ["When do I next discuss my investments with someone?", "Add the finance check-in to my calendar."]),
    ("shared", "Refund window", "Customers get their money back within 30 days of purchase if they show the receipt.",
     ["A buyer wants to return a jacket bought three weeks ago — allowed?", "Can a client reclaim payment after two months?"]),
    ("shared", "Travel booking rules", "Flights under six hours are economy; book through the travel desk two weeks ahead.",
     ["I'm going to the Madrid conference, can I fly business?", "How late can I arrange the trip to the Berlin client?"]),
    ("shared", "Alcohol not reimbursed", "Expense claims never cover alcohol, whatever the occasion.",
     ["Can I claim the wine from the client dinner?", "The team had beers after the offsite; who pays?"]),
    ("shared", "Incident comms", "During an outage, status updates go out every 30 minutes on the status page.",
     ["The site is down — how often do we tell customers?", "Draft the first message for customers about the downtime."]),
    ("shared", "Brand colours", "The brand colours are #0B3D91 navy and #F2A900 amber; never use pure black.",
     ["Pick a palette for the conference banner.", "What palette should the new slides use?"]),
    ("shared", "Visitor badges", "Guests sign in at reception and wear a red badge; they are escorted at all times.",
     ["A candidate comes for an interview on Friday; what should happen at the door?", "My cousin will drop by the office tomorrow."]),
    ("shared", "Password manager", "All team credentials live in 1Password; never paste secrets into chat or tickets.",
     ["Where do I keep the login for the analytics dashboard?", "Can I message the API key to the contractor?"]),
    ("shared", "Quarter close", "Finance closes the books on the fifth working day after each quarter ends.",
     ["When must invoices for Q3 be in?", "Deadline for submitting my July–September expense claims?"]),
]


def _name(rng: random.Random) -> str:
    return f"{rng.choice(FIRST)} {rng.choice(LAST)}"


def _long(rng: random.Random, head: str, chars: int) -> str:
    parts = [head]
    while sum(len(p) for p in parts) < chars:
        parts.append(" ".join(rng.sample(FILLER, 3)))
    return "\n\n".join(parts)


def _personal(rng: random.Random, i: int) -> tuple[str, str, tuple[str, ...], list[str]]:
    """One background memory: title, body, tags, and the words a message may name it by."""
    if i < len(HOME):  # one of each: a household has one boiler
        what, body = HOME[i]
        text = body.format(m=rng.choice(MONTHS), n=rng.choice(LAST), c=rng.choice(COMPANIES), y=rng.randint(2026, 2032),
                           k=rng.randint(10000, 99999), w=rng.choice(WEEKDAYS))
        return what, text, ("home",), [what]
    kind = i % 5
    if kind == 0:
        p, (aspect, body) = rng.choice(PROJECTS), rng.choice(ASPECTS)
        n, n2 = _name(rng), _name(rng)
        text = body.format(p=p, pl=p.lower(), d=rng.randint(1, 28), m=rng.choice(MONTHS), n=n, n2=n2,
                           k=rng.randint(3, 90), c=rng.choice(COMPANIES), w=rng.choice(WEEKDAYS))
        return f"Project {p}: {aspect}", text, ("project", p.lower()), [p, aspect]
    if kind == 1:
        n, (what, body) = _name(rng), rng.choice(PREFERENCES)
        return f"{n} — {what}", body.format(n=n.split()[0]), ("people",), [n, what]
    if kind == 2:
        n = _name(rng)
        text = (f"{n}'s birthday is on {rng.randint(1, 28)} {rng.choice(MONTHS)}. "
                f"Good gifts: {rng.choice(GIFTS)}; lives in {rng.choice(CITIES)}.")
        return f"Birthday: {n}", text, ("birthdays",), [n, "birthday"]
    if kind == 3:
        n, c, r = _name(rng), rng.choice(COMPANIES), rng.choice(ROLES)
        text = (f"{n} is the {r} at {c}. Met at the {rng.choice(CITIES)} summit; prefers short agendas "
                f"sent a day ahead.")
        return f"{n} ({c})", text, ("work", "contacts"), [n, c]
    p = rng.choice(PROJECTS)
    city = rng.choice(CITIES)
    head = f"Notes from the {p} workshop with {_name(rng)} in {city}."
    return (f"{p} workshop notes ({city})", _long(rng, head, rng.randint(2_000, 9_000)), ("meetings", p.lower()),
            [p, city])


def generate(personal: int = 1500, shared: int = 100, messages: int = 150, seed: int = 14) -> MemorySet:
    """The memory set and the messages; see the module docstring."""
    rng = random.Random(seed)
    mems: list[Mem] = []
    names: dict[str, list[str]] = {}
    start = 1_700_000_000_000
    hidden = [h for h in HIDDEN if h[0] == "personal"], [h for h in HIDDEN if h[0] == "shared"]
    titles: set[str] = set()
    i = 0
    while len(mems) < personal - len(hidden[0]):
        title, body, tags, by = _personal(rng, i)
        i += 1
        if title in titles:  # one memory per subject, so a message that names it names one
            continue
        titles.add(title)
        key = f"p{len(mems)}"
        mems.append(Mem(key, "personal", title, body, tags, start + rng.randint(0, 400 * 86_400_000)))
        names[key] = by
    for i in range(shared - len(hidden[1])):
        (title, body), team = POLICIES[(i // len(TEAMS)) % len(POLICIES)], TEAMS[i % len(TEAMS)]
        text = body.format(k=rng.randint(5, 60), w=rng.choice(WEEKDAYS))
        key = f"s{i}"
        mems.append(Mem(key, "shared", f"{team}: {title}", f"{team} team — {text}", ("policy", team.lower()),
                        start + rng.randint(0, 400 * 86_400_000)))
        names[key] = [team, title.split()[0]]
    for j, (scope, title, body, _asks) in enumerate(HIDDEN):
        mems.append(Mem(f"h{j}", scope, title, body, ("facts",), start + rng.randint(0, 400 * 86_400_000)))
    by_key = {m.key: m for m in mems}

    asks: list[Ask] = []
    half = messages // 2
    # Sharing none: the hand-written paraphrases, checked.
    pool = [(f"h{j}", ask) for j, h in enumerate(HIDDEN) for ask in h[3]]
    rng.shuffle(pool)
    for key, text in pool[: messages - half]:
        m = by_key[key]
        overlap = words(text) & words(f"{m.title} {m.content}")
        assert not overlap, f"{text!r} shares {overlap} with {m.title!r}"
        asks.append(Ask(text, key, False))
    # Sharing a word: a background memory asked about by one of its names.
    keys = [k for k in names if k.startswith("p")] + [k for k in names if k.startswith("s")]
    frames = ["Remind me about {x}.", "What do I know about {x}?", "Anything I should keep in mind on {x} today?",
              "Draft a short note about {x} for tomorrow.", "Quick question on {x}."]
    while len(asks) < messages:
        key = rng.choice(keys)
        m = by_key[key]
        x = " ".join(names[key])
        text = rng.choice(frames).format(x=x)
        if words(text) & words(f"{m.title} {m.content}"):
            asks.append(Ask(text, key, True))
    return MemorySet(mems, asks)
