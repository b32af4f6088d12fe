//! Deciding a definition in the console: `POST /console/pins/{approve|reject}` for one changed definition (the
//! tools page's forms), and the refusal that it and the onboarding page's bulk forms give a person whom the approver
//! rules forbid pin decisions.
//!
//! Approving binds to the fingerprint the page showed (a hidden form field): a definition that changed again while
//! the person read the diff is refused with 409, never pinned by accident. Decisions go to the store, where the
//! gateway reads pins on its next listing, exactly as `toolgate pins approve | reject` does. No page is rendered
//! here but the short answers.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use toolgate_store::{PinDecision, PinDecisionRecord, PinKind, StoreError};

use crate::handlers::{checked_post, see_other, store_failure};
use crate::html::message;
use crate::session::Session;
use crate::{Console, form};

/// `POST /console/pins/{approve|reject}` with `csrf`, `upstream`, `tool` and `fingerprint` fields.
pub(crate) async fn decide_pin(
    State(console): State<Console>,
    Path(decision): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let post = match checked_post(&console, &headers, &body).await {
        Ok(post) => post,
        Err(refusal) => return refusal.into_response(),
    };
    let (fields, decided_by) = (&post.fields, post.session.identity.as_str());
    let (Some(upstream), Some(tool), Some(fingerprint)) =
        (form::field(fields, "upstream"), form::field(fields, "tool"), form::field(fields, "fingerprint"))
    else {
        let page = message("Bad request", "The form needs upstream, tool and fingerprint.", true);
        return (StatusCode::BAD_REQUEST, Html(page)).into_response();
    };
    // Forms from before pins had kinds carry none: those are tools.
    let Some(kind) = form::field(fields, "kind").map_or(Some(PinKind::Tool), PinKind::parse) else {
        let page = message("Bad request", "The form names an unknown kind of definition.", true);
        return (StatusCode::BAD_REQUEST, Html(page)).into_response();
    };
    let pins = console.store.pins();
    let current = match pins.pending_of(upstream, kind, tool).await {
        Ok(current) => current,
        Err(error) => return store_failure(&error),
    };
    let Some(current) = current else {
        let page = message("Not found", "This tool has no definition waiting for review.", true);
        return (StatusCode::NOT_FOUND, Html(page)).into_response();
    };
    if current.proposed.fingerprint.whole != fingerprint {
        let text = "The definition changed again after this page was shown; review the new diff.";
        return (StatusCode::CONFLICT, Html(message("Changed again", text, true))).into_response();
    }
    let recorded = match decision.as_str() {
        "approve" => PinDecision::Approved,
        "reject" => PinDecision::Rejected,
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    let record = PinDecisionRecord {
        upstream,
        kind,
        name: tool,
        fingerprint,
        decision: recorded,
        decided_by,
        decided_by_name: post.session.display.as_deref(),
    };
    if let Some(refusal) = refuse_pin_decider(&console, &post.session, &[record]).await {
        return refusal;
    }
    let result = match recorded {
        PinDecision::Approved => {
            pins.approve_pending_of(upstream, kind, tool, fingerprint, decided_by).await.map(|_| ())
        }
        PinDecision::Rejected => pins.reject_pending_of(upstream, kind, tool).await.map(|_| ()),
    };
    match result {
        Ok(()) => {
            let kind_name = kind.as_str();
            tracing::info!(
                upstream,
                kind = kind_name,
                tool,
                fingerprint,
                decision,
                decided_by,
                "definition decided in the console"
            );
            match console.store.record_pin(&record).await {
                Ok(_) => see_other("/console/tools"),
                Err(error) => store_failure(&error),
            }
        }
        Err(StoreError::NotFound(_)) => {
            let text = "The definition was decided or changed while this request ran; review the page again.";
            (StatusCode::CONFLICT, Html(message("Changed again", text, true))).into_response()
        }
        Err(error) => store_failure(&error),
    }
}

/// A `403` page (after one audit row per definition, outcome `refused`) when the approver rules forbid this person
/// the decisions in `records`; `None` when they may go on. A definition has no caller, so only the approver group
/// applies, to pinning and rejecting alike.
pub(crate) async fn refuse_pin_decider(
    console: &Console,
    session: &Session,
    records: &[PinDecisionRecord<'_>],
) -> Option<Response> {
    let approve = records.iter().any(|record| record.decision == PinDecision::Approved);
    let reason = crate::approvers::may_decide(console, session, None, approve).err()?.reason();
    tracing::warn!(decided_by = %session.identity, reason, "console: a pin decision was refused");
    for record in records {
        if let Err(error) = console.store.record_pin_refusal(record, &reason).await {
            return Some(store_failure(&error));
        }
    }
    let text = format!("Refused: {reason}. The definition still waits for someone else.");
    Some((StatusCode::FORBIDDEN, Html(message("Not allowed", &text, true))).into_response())
}
