#!/usr/bin/python3
"""Every command, verb and option that `lacuna ... --help` lists is in the
user guide (docs/guide.md) and in the manual page (docs/lacuna.1).

usage: docs_options.py LACUNA GUIDE MANPAGE
The commands come from `lacuna --help`, the verbs from each command's help
("verbs:" lines, or "lacuna CMD VERB --..." usage lines), the options from
the indented option lines of each verb's help; so a new option fails this
test until both documents name it.
"""
import re
import subprocess
import sys


def help_text(tool, *words):
    r = subprocess.run([tool, *words, "--help"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("FAIL: `lacuna %s --help` exits %d" % (" ".join(words), r.returncode))
    return r.stdout


def verbs_of(tool, command):
    text = help_text(tool, command)
    verbs = []
    if "\nverbs:\n" in text:
        block = text.split("\nverbs:\n", 1)[1].split("\n\n", 1)[0]
        verbs = [line.split()[0] for line in block.splitlines() if line.strip()]
    for m in re.finditer(r"^(?:usage: )?\s*lacuna %s ([a-z]+) " % command, text, re.M):
        if m.group(1) not in verbs:
            verbs.append(m.group(1))
    return verbs


def options_of(text):
    opts = []
    for line in text.splitlines():
        m = re.match(r"^  (-{1,2}[A-Za-z0-9][\w-]*)(?:, (-{1,2}[A-Za-z0-9][\w-]*))?", line)
        if m:
            opts += [o for o in m.groups() if o]
    return opts


def mentions(doc, word):
    return re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(word), doc) is not None


def main():
    tool, guide_path, man_path = sys.argv[1:4]
    guide = open(guide_path, encoding="utf-8").read()
    man = open(man_path, encoding="utf-8").read()
    man = re.sub(r"\\f[BIRP]", "", man).replace("\\-", "-").replace("\\e", "\\")
    top = help_text(tool)
    commands = [line.split()[0] for line in top.split("\ncommands:\n", 1)[1].split("\n\n", 1)[0].splitlines()
                if line.strip()]
    missing, checked = [], 0
    for command in commands:
        for verb in verbs_of(tool, command) or [None]:
            words = [command] + ([verb] if verb else [])
            name = "lacuna " + " ".join(words)
            for doc, label in ((guide, guide_path), (man, man_path)):
                if name not in doc and not (verb and re.search(r"lacuna %s [^\n]*\b%s\b" % (command, verb), doc)):
                    missing.append("%s: the command `%s`" % (label, name))
            for opt in dict.fromkeys(options_of(help_text(tool, *words))):
                checked += 1
                for doc, label in ((guide, guide_path), (man, man_path)):
                    if not mentions(doc, opt):
                        missing.append("%s: `%s` of `%s`" % (label, opt, name))
    for m in missing:
        print("FAIL: not documented in " + m)
    print("%d commands, %d options checked; %d missing" % (len(commands), checked, len(missing)))
    return 1 if missing else 0


sys.exit(main())
