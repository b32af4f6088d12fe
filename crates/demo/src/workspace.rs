//! The demo's notes workspace: notes, an email outbox, share links and a tiny offline "web".
//!
//! Plain data and synchronous methods, kept in memory for the life of one server. This module knows nothing
//! about MCP (the tool surface and its annotations live in `server.rs`), and it must never touch the disk or
//! the network: `search_web` reads a built-in dataset and `send_email`/`export` only record what they would do.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

/// One note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Note {
    /// Stable identifier, never reused within one server.
    pub id: u64,
    /// Short title.
    pub title: String,
    /// Free text.
    pub body: String,
    /// Labels, sorted and unique.
    pub tags: BTreeSet<String>,
    /// Archived notes are hidden from listings unless asked for.
    pub archived: bool,
}

/// A message `send_email` recorded instead of delivering it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutgoingEmail {
    /// Recipient address as given.
    pub to: String,
    /// Subject line.
    pub subject: String,
    /// Plain-text body.
    pub body: String,
}

/// One result of the offline web search.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct WebPage {
    /// Page title.
    pub title: String,
    /// Where the page would be.
    pub url: String,
    /// A short extract.
    pub snippet: String,
}

/// What the built-in "web" knows: (title, url, snippet). Example domains only.
const WEB_PAGES: &[(&str, &str, &str)] = &[
    (
        "Model Context Protocol specification",
        "https://spec.example.org/mcp",
        "MCP connects language model applications to tools, resources and prompts over JSON-RPC.",
    ),
    (
        "Tool annotations explained",
        "https://blog.example.org/tool-annotations",
        "readOnlyHint, destructiveHint, idempotentHint and openWorldHint describe what a tool does; they are hints.",
    ),
    (
        "Writing good meeting notes",
        "https://howto.example.com/meeting-notes",
        "Record decisions, owners and dates; tag notes so they can be found later.",
    ),
    (
        "Rust async book",
        "https://books.example.net/async-rust",
        "Futures, executors and tokio: how asynchronous Rust programs run.",
    ),
    (
        "Email etiquette for teams",
        "https://howto.example.com/email-etiquette",
        "Keep subjects specific, one topic per email, and never send secrets in plain text.",
    ),
    ("Weather in Lisbon", "https://weather.example.com/lisbon", "Sunny, 24 degrees, light wind from the north-west."),
];

/// The whole in-memory state of one demo server.
#[derive(Debug, Clone)]
pub struct Workspace {
    notes: BTreeMap<u64, Note>,
    next_id: u64,
    outbox: Vec<OutgoingEmail>,
    share_links: Vec<String>,
}

impl Default for Workspace {
    fn default() -> Self {
        Self::seeded()
    }
}

impl Workspace {
    /// An empty workspace.
    pub fn empty() -> Self {
        Workspace { notes: BTreeMap::new(), next_id: 1, outbox: Vec::new(), share_links: Vec::new() }
    }

    /// A workspace with three sample notes, so read tools have something to show.
    pub fn seeded() -> Self {
        let mut workspace = Self::empty();
        workspace.add_note("Groceries", "Milk, eggs, coffee beans.", &["personal".to_owned()]);
        workspace.add_note(
            "Q3 planning",
            "Ship the gateway preview; decide on the policy language.",
            &["work".to_owned(), "planning".to_owned()],
        );
        workspace.add_note("Book ideas", "A field guide to honest tool annotations.", &["ideas".to_owned()]);
        workspace
    }

    /// Notes in id order; archived ones only when `include_archived`; only those tagged `tag` when given.
    pub fn list_notes(&self, tag: Option<&str>, include_archived: bool) -> Vec<Note> {
        self.notes
            .values()
            .filter(|note| include_archived || !note.archived)
            .filter(|note| tag.is_none_or(|tag| note.tags.contains(tag)))
            .cloned()
            .collect()
    }

    /// The note with this id, archived or not.
    pub fn get_note(&self, id: u64) -> Option<&Note> {
        self.notes.get(&id)
    }

    /// Adds a new note and returns it; the same arguments twice make two notes.
    pub fn add_note(&mut self, title: &str, body: &str, tags: &[String]) -> Note {
        let note = Note {
            id: self.next_id,
            title: title.to_owned(),
            body: body.to_owned(),
            tags: normalize_tags(tags),
            archived: false,
        };
        self.next_id += 1;
        self.notes.insert(note.id, note.clone());
        note
    }

    /// Replaces a note's tags; returns the tags it had before, or `None` when there is no such note.
    pub fn set_note_tags(&mut self, id: u64, tags: &[String]) -> Option<BTreeSet<String>> {
        let note = self.notes.get_mut(&id)?;
        Some(std::mem::replace(&mut note.tags, normalize_tags(tags)))
    }

    /// Removes a note for good; returns it, or `None` when it was already gone.
    pub fn delete_note(&mut self, id: u64) -> Option<Note> {
        self.notes.remove(&id)
    }

    /// Marks every live note carrying `tag` (or every live note when `None`) archived; returns their ids.
    pub fn archive_notes(&mut self, tag: Option<&str>) -> Vec<u64> {
        let mut archived = Vec::new();
        for note in self.notes.values_mut() {
            if !note.archived && tag.is_none_or(|tag| note.tags.contains(tag)) {
                note.archived = true;
                archived.push(note.id);
            }
        }
        archived
    }

    /// Deletes every note, archived or not; returns how many were deleted.
    pub fn purge_notes(&mut self) -> usize {
        let count = self.notes.len();
        self.notes.clear();
        count
    }

    /// "Publishes" the live notes as a share link anyone can open and returns the link.
    pub fn export_notes(&mut self) -> (String, usize) {
        let count = self.list_notes(None, false).len();
        let link = format!("https://share.example.com/notes/{}", self.share_links.len() + 1);
        self.share_links.push(link.clone());
        (link, count)
    }

    /// Records an email in the outbox; returns its position there (1-based).
    pub fn send_email(&mut self, to: &str, subject: &str, body: &str) -> usize {
        self.outbox.push(OutgoingEmail { to: to.to_owned(), subject: subject.to_owned(), body: body.to_owned() });
        self.outbox.len()
    }

    /// Everything `send_email` recorded, oldest first.
    pub fn outbox(&self) -> &[OutgoingEmail] {
        &self.outbox
    }

    /// Every link `export_notes` handed out, oldest first.
    pub fn share_links(&self) -> &[String] {
        &self.share_links
    }
}

/// Pages of the built-in web whose title or snippet contains every word of `query` (case-insensitive).
pub fn search_web(query: &str, limit: usize) -> Vec<WebPage> {
    let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
    WEB_PAGES
        .iter()
        .filter(|(title, _, snippet)| {
            let haystack = format!("{title} {snippet}").to_lowercase();
            !words.is_empty() && words.iter().all(|word| haystack.contains(word.as_str()))
        })
        .take(limit)
        .map(|(title, url, snippet)| WebPage {
            title: (*title).to_owned(),
            url: (*url).to_owned(),
            snippet: (*snippet).to_owned(),
        })
        .collect()
}

fn normalize_tags(tags: &[String]) -> BTreeSet<String> {
    tags.iter().map(|tag| tag.trim().to_lowercase()).filter(|tag| !tag.is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_is_not_idempotent_and_set_tags_is() {
        let mut workspace = Workspace::empty();
        let first = workspace.add_note("a", "b", &[]);
        let second = workspace.add_note("a", "b", &[]);
        assert_ne!(first.id, second.id);

        let tags = vec!["Work".to_owned(), " work ".to_owned(), "x".to_owned()];
        assert_eq!(workspace.set_note_tags(first.id, &tags), Some(BTreeSet::new()));
        let again = workspace.set_note_tags(first.id, &tags);
        assert_eq!(again, Some(BTreeSet::from(["work".to_owned(), "x".to_owned()])));
        assert_eq!(workspace.set_note_tags(99, &tags), None);
    }

    #[test]
    fn archive_hides_and_purge_removes_everything() {
        let mut workspace = Workspace::seeded();
        assert_eq!(workspace.archive_notes(Some("work")), vec![2]);
        assert_eq!(workspace.list_notes(None, false).len(), 2);
        assert_eq!(workspace.list_notes(None, true).len(), 3);
        assert_eq!(workspace.purge_notes(), 3);
        assert!(workspace.list_notes(None, true).is_empty());
    }

    #[test]
    fn search_matches_every_word() {
        assert_eq!(search_web("tool ANNOTATIONS", 5).len(), 1);
        assert_eq!(search_web("notes", 5).len(), 1);
        assert!(search_web("", 5).is_empty());
        assert!(search_web("nothing-here", 5).is_empty());
    }

    #[test]
    fn side_effects_are_recorded_not_performed() {
        let mut workspace = Workspace::seeded();
        assert_eq!(workspace.send_email("a@example.com", "hi", "there"), 1);
        assert_eq!(workspace.outbox().len(), 1);
        let (link, count) = workspace.export_notes();
        assert_eq!(count, 3);
        assert_eq!(workspace.share_links(), [link]);
    }
}
