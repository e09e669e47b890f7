#!/usr/bin/env python3
"""Writes data/medusa_train_prompts.txt: varied chat instructions for
`cllm medusa train` (ordinary requests an assistant gets: explain, compare,
advise, write, list, describe), made from sentence patterns and topics with
a fixed seed. None of them is a line of bench/data/chat_prompts_50.txt, the
benchmark's prompts, which the heads must not see.

    python3 scripts/medusa_prompts.py [--count 1600]
"""
import argparse
import random
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PATTERNS = [
    "Explain {t} in simple words.", "Write a short paragraph about {t}.", "What are the most important facts about {t}?",
    "Give me a brief history of {t}.", "Describe {t} to a curious child.", "What are the pros and cons of {t}?",
    "Why does {t} matter?", "Tell me something surprising about {t}.", "Write a short poem about {t}.",
    "How would you teach a beginner about {t}?", "Write the opening of a blog post about {t}.",
    "List three common misconceptions about {t}.", "What is the future of {t}?", "Summarize what you know about {t}.",
    "Write a dialogue where two friends talk about {t}.", "Give me five interesting questions about {t}.",
    "How does {t} work?", "What should everyone know about {t}?", "Write a short story that involves {t}.",
    "Compare {t} and {u}.", "What is the difference between {t} and {u}?", "How are {t} and {u} connected?",
    "Write a short essay on {t}.", "Tell me about {t}.", "Give me tips for learning about {t}.",
    "What would happen if {t} disappeared?", "Describe {t} in three sentences.", "Write a riddle about {t}.",
]
TASKS = [
    "Give me {n} tips for {a}.", "How do I {a}?", "What is the best way to {a}?", "Write a checklist to {a}.",
    "Explain step by step how to {a}.", "What mistakes do people make when they {a}?",
    "Write a short guide on how to {a}.", "I want to {a}. Where should I start?",
]
WRITING = [
    "Write a {k} for {w}.", "Help me write a {k} for {w}.", "Draft a short {k} for {w}.",
]
TOPICS = """the moon|volcanoes|coffee|the Roman Empire|electric cars|rainforests|the printing press|sourdough bread|
jazz music|honeybees|glaciers|the human heart|solar panels|the Olympic Games|penguins|paper money|the Great Wall of
China|recycling|mountain climbing|the violin|deserts|the telephone|coral reefs|public libraries|wind turbines|the Silk
Road|sharks|gardening|chocolate|trains|the periodic table|dinosaurs|the stock market|yoga|photography|the water
cycle|board games|the French Revolution|artificial intelligence|the Amazon river|hurricanes|the microscope|origami|
space travel|the immune system|ancient Greece|wolves|cheese|the Eiffel Tower|kites|democracy|the Internet|rivers|
whales|football|the Renaissance|clocks|mushrooms|castles|meditation|the Sahara|elephants|tsunamis|robots|the piano|
video games|the human brain|spices|submarines|the alphabet|owls|skyscrapers|rice|tornadoes|classical music|pirates|
vitamins|the Arctic|hot air balloons|the Nile|bridges|volunteering|magnets|gravity|electricity|the Sun|Mars|
rainbows|snowflakes|sleep|dreams|memory|friendship|music festivals|museums|newspapers|podcasts|smartphones|email|
passwords|cloud computing|3D printing|batteries|nuclear power|oil|plastic|glass|steel|cotton|wool|bamboo|coffee
shops|bakeries|farmers markets|supermarkets|restaurants|street food|pizza|sushi|bread|olive oil|honey|salt|sugar|
tea|milk|eggs|apples|bananas|potatoes|tomatoes|the heartbeat|bones|muscles|the skin|the eyes|teeth|the lungs|
bacteria|fungi|trees|flowers|grass|cacti|mosses|frogs|butterflies|ants|spiders|snakes|turtles|horses|cows|sheep|
goats|chickens|parrots|eagles|dolphins|octopuses|jellyfish|salmon|polar bears|tigers|lions|giraffes|zebras|camels|
kangaroos|koalas|pandas|bats|rats|the ocean floor|caves|islands|lakes|waterfalls|canyons|forests|prairies|swamps|
cities|villages|airports|harbors|highways|bicycles|motorcycles|ships|rockets|satellites|telescopes|maps|compasses|
calendars|the number zero|fractions|probability|statistics|geometry|algebra|prime numbers|infinity|chess|poker|
tennis|swimming|running|cycling|skiing|surfing|boxing|basketball|baseball|cricket|golf|marathons|the Tour de
France|opera|ballet|theater|cinema|animation|comics|novels|poetry|fairy tales|myths|legends|folk songs|painting|
sculpture|architecture|fashion|tattoos|jewelry|perfume|soap|toothpaste|umbrellas|elevators|escalators|traffic
lights|fire trucks|hospitals|schools|universities|homework|exams|teachers|libraries|languages|sign language|
writing systems|translation|accents|dialects|slang|emoji|handwriting|typewriters|printers|radio|television|
advertising|money|banks|taxes|insurance|credit cards|inflation|trade|markets|startups|factories|farming|fishing|
mining|forestry|weather forecasts|climate change|air pollution|clean water|earthquakes|floods|droughts|wildfires|
vaccines|antibiotics|first aid|exercise|nutrition|stress|happiness|kindness|honesty|courage|patience|curiosity|
creativity|leadership|teamwork|negotiation|time management|habits|goals|motivation|procrastination|minimalism|
travel|camping|hiking|picnics|road trips|holidays|birthdays|weddings|festivals|New Year traditions|ancient Egypt|
the Vikings|the Maya|the Industrial Revolution|the Cold War|the Moon landing|the invention of the wheel|medieval
knights|samurai|explorers|inventors|scientists|astronauts|firefighters|nurses|farmers|pilots|chefs|architects""".replace("\n", "")
ACTIVITIES = """learn to cook|save money|learn a new language|start a vegetable garden|get better at drawing|keep a
journal|make new friends|prepare for an exam|organize my kitchen|train a puppy|reduce screen time|write a novel|learn
to swim|build a bookshelf|run a 5k|plan a birthday party|start a small business|learn to play guitar|take better
photos|clean my car|wake up earlier|stop procrastinating|eat more vegetables|decorate a small apartment|pack a
suitcase|learn to code|improve my handwriting|grow herbs indoors|study for a driving test|plan a family trip|make
bread at home|meditate|become more confident|give a toast|care for a cat|fix a squeaky door|write a cover letter|
choose a laptop|keep my plants alive|learn chess|stay warm in winter|cool my house in summer|make a budget|host a
dinner party|ask for a raise|read more books|learn to knit|start recycling at home""".replace("\n", "")
KINDS = ["letter", "short speech", "text message", "invitation", "poem", "toast", "thank-you note", "apology",
         "product review", "job ad", "announcement", "story opening", "limerick", "birthday card", "complaint"]
WHOM = ["my neighbor", "a retiring colleague", "my best friend", "a new team member", "my grandparents",
        "a local bookshop", "a school reunion", "my sister's graduation", "a charity run", "a lost cat poster",
        "my landlord", "a camping trip", "a hotel that lost my booking", "a science fair", "a cooking class"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=1600)
    a = ap.parse_args()
    topics = [t.strip() for t in TOPICS.split("|") if t.strip()]
    acts = [t.strip() for t in ACTIVITIES.split("|") if t.strip()]
    rng = random.Random(11)
    bench = set((REPO / "bench" / "data" / "chat_prompts_50.txt").read_text().splitlines())
    out, seen = [], set()
    while len(out) < a.count:
        r = rng.random()
        if r < 0.7:
            t, u = rng.sample(topics, 2)
            line = rng.choice(PATTERNS).format(t=t, u=u)
        elif r < 0.9:
            line = rng.choice(TASKS).format(n=rng.choice(["three", "four", "five"]), a=rng.choice(acts))
        else:
            line = rng.choice(WRITING).format(k=rng.choice(KINDS), w=rng.choice(WHOM))
        line = line[0].upper() + line[1:]
        if line in seen or line in bench:
            continue
        seen.add(line)
        out.append(line)
    (REPO / "data" / "medusa_train_prompts.txt").write_text("\n".join(out) + "\n")
    print(f"{len(out)} prompts, {len(topics)} topics, {len(acts)} activities")


if __name__ == "__main__":
    main()
