//! Confirmation by a person, in a way a model cannot forge.
//!
//! When the client declared form elicitation (an empty `elicitation` object or one with `form`; a client that
//! declared only `url` cannot show a form) and config does not insist on the queue, toolgate asks during the call
//! with `elicitation/create`: the tool's title, action phrase, upstream, the policy's reasons and a short summary of
//! the arguments. Otherwise the call waits (bounded) in the approval queue of the store, where a person approves or
//! denies it with `toolgate approvals` (or the console). An approval binds to the tool's fingerprint and the digest
//! of the exact arguments, is single use and expires; no approval code is ever sent to the client, so nothing the
//! model relays can approve anything. "Remember for this session" covers the same tool and argument shape. A
//! 2026-07-28 request that declared form elicitation in its own `_meta` gets the same question as an
//! `input_required` round trip (`guard::round_trip`: a sealed request state bound to the caller, fingerprint,
//! argument digest, expiry and a single-use nonce), or in URL mode a link to the console's page of a detached
//! approval (`guard::console_round`, `[confirmation] modern`); one that declared neither waits in the approval
//! queue, as a legacy client without elicitation does, and is never asked.
//!
//! A person answers about the definition they were shown, and the catalog can change while they think (a rug pull
//! through `list_changed`, a quarantine, a policy reload). So after a yes the tool is resolved again from the
//! current catalog: if it is gone or hidden, newly quarantined, denied, or its fingerprint is not the approved one,
//! the approval lapses ([`Confirmation::Lapsed`]; the call's end phase answers with an `isError` result and a
//! `confirmation` audit row with outcome `tool_changed`); otherwise the call goes on with the tool as it is now.
//!
//! The call's one audit row is journaled here, as the person is asked (kind `call`, verdict `confirm`, the approval
//! id when the queue is used: `guard::audit::record_waiting`), into the slot the caller hands in; a call whose row
//! cannot be journaled is not put to anyone ([`Confirmation::Unrecorded`]). Every way it ends is a typed value
//! ([`Confirmation`], [`NotApproved`] with its audit [`NotApproved::outcome`]) that `crate::call` records by
//! completing that row (or forwarding with it); this module completes no row itself. A person's own act in the
//! queue (`toolgate approvals approve|deny`, the console) is that person's `confirmation` row, written where they
//! decide.

use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_core::decision::Decision;
use toolgate_core::display::{json_text, quoted};
use toolgate_core::policy::approval::{ApprovalScope, BoundTool, bind_approval};
use toolgate_spec::{ConfirmVia, ConfirmationSpec, ModernConfirm};
use toolgate_store::{ApprovalId, ApprovalWait, PendingCall, StoreError, digest_arguments};

use crate::access::{Lapse, current_tool};
use crate::call::context::CallContext;
use crate::catalog::ExposedTool;
use crate::guard::approval_quota::QuotaExceeded;
use crate::guard::audit;
use crate::guard::console_round::{self, ConsoleRound, UrlQuestion};
use crate::guard::round_trip::{self, RoundTrip, StateRefusal};
use crate::guard::waiting::{QueuedCall, new_approval, tell_where_it_waits};
use crate::state::session::SessionShared;
use crate::state::shared::Shared;

/// What the person said.
pub(crate) enum Confirmation {
    /// Go ahead with `tool`, the approved definition as the catalog has it now; the approval id when the queue was
    /// used.
    Approved { approval_id: Option<String>, via: ApprovedVia, tool: Arc<ExposedTool> },
    /// Do not forward: nobody approved it.
    Refused(NotApproved),
    /// Approved, but the tool changed while the person thought: do not forward.
    Lapsed { lapse: Lapse, approval_id: Option<String> },
    /// The call's audit row could not be journaled, so nobody was asked: do not forward.
    Unrecorded(String),
    /// A 2026-07-28 request is asked by answering it with this `input_required` result: not forwarded yet.
    InputRequired(Value),
    /// A 2026-07-28 retry whose request state (or answer) was refused: do not forward.
    StateRefused(StateRefusal),
}

/// How a call was approved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ApprovedVia {
    /// The same tool with arguments of the same shape was approved earlier in this session, to be remembered.
    Remembered,
    /// The client's user answered toolgate's `elicitation/create`.
    Elicitation,
    /// The same, and asked to remember it for this session.
    ElicitationRemember,
    /// A person approved it in the approval queue.
    Queue,
    /// The client's user answered toolgate's question in a 2026-07-28 `input_required` round trip.
    RoundTrip,
    /// A person approved it in the console's page that a 2026-07-28 URL-mode question pointed to.
    Console,
}

impl ApprovedVia {
    /// The name the audit row's reason gives it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ApprovedVia::Remembered => "remembered-for-session",
            ApprovedVia::Elicitation => "elicitation",
            ApprovedVia::ElicitationRemember => "elicitation-remember",
            ApprovedVia::Queue => "queue",
            ApprovedVia::RoundTrip => "input-required",
            ApprovedVia::Console => "console-url",
        }
    }
}

/// Why nobody approved a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NotApproved {
    /// The client did not answer the question (closed, or timed out).
    NobodyAnswered,
    /// The user declined the question (`cancelled`: dismissed it).
    Declined { cancelled: bool },
    /// The client cannot be asked and there is no approval queue.
    NoQueue,
    /// The session or caller already has as many approvals waiting as it may.
    QueueFull(QuotaExceeded),
    /// The approval could not be queued (the store's error: for the log and the row, never the model).
    CannotQueue(String),
    /// A person approved it, but the approval could not be used: the store refused it (`store_failed` false: its
    /// reason is the model's to read) or failed (true: its error is for the log and the row only).
    Unusable { by: String, error: String, store_failed: bool },
    /// A person denied it.
    DeniedBy(String),
    /// Nobody decided within this many seconds.
    TimedOut(u64),
    /// The approval was used already.
    AlreadyUsed,
    /// The approval lapsed before anyone decided.
    LapsedUndecided,
    /// Waiting for the decision failed (the store's error: for the log and the row, never the model).
    WaitFailed(String),
}

impl NotApproved {
    /// The call row's outcome: why it was not forwarded. None of these is a forwarded call's outcome (`ok`,
    /// `is_error`, `jsonrpc_error`, `cancelled`, `abandoned`, `not_recorded`), which is how the console's chart tells
    /// a confirmed call that went through from one that did not.
    pub(crate) fn outcome(&self) -> &'static str {
        match self {
            NotApproved::NobodyAnswered => "no_answer",
            NotApproved::Declined { cancelled: false } => "declined",
            NotApproved::Declined { cancelled: true } => "dismissed",
            NotApproved::NoQueue => "no_queue",
            NotApproved::QueueFull(_) => "queue_full",
            NotApproved::CannotQueue(_) => "cannot_queue",
            NotApproved::Unusable { .. } => "approval_unusable",
            NotApproved::DeniedBy(_) => "denied",
            NotApproved::TimedOut(_) => "timed_out",
            NotApproved::AlreadyUsed => "already_used",
            NotApproved::LapsedUndecided => "lapsed",
            NotApproved::WaitFailed(_) => "wait_failed",
        }
    }

    /// The call row's detail: what more there is to say (who, how long, which limit, what failed).
    pub(crate) fn detail(&self) -> Option<Value> {
        match self {
            NotApproved::QueueFull(exceeded) => {
                let (scope, limit, setting) = exceeded.setting();
                Some(json!({"scope": scope, "limit": limit, "setting": setting}))
            }
            NotApproved::CannotQueue(error) | NotApproved::WaitFailed(error) => Some(json!({"error": error})),
            NotApproved::Unusable { by, error, .. } => Some(json!({"by": by, "error": error})),
            NotApproved::DeniedBy(by) => Some(json!({"by": by})),
            NotApproved::TimedOut(seconds) => Some(json!({"reason": format!("nobody decided within {seconds} s")})),
            NotApproved::NobodyAnswered
            | NotApproved::Declined { .. }
            | NotApproved::NoQueue
            | NotApproved::AlreadyUsed
            | NotApproved::LapsedUndecided => None,
        }
    }

    /// What the model is told about a call to `tool` that was not approved.
    pub(crate) fn message(&self, tool: &str) -> String {
        match self {
            NotApproved::NobodyAnswered => "toolgate: nobody answered the confirmation; the call was not made".into(),
            NotApproved::Declined { cancelled } => {
                let what = if *cancelled { "cancelled" } else { "declined" };
                format!(
                    "toolgate: the user {what} this call to {tool}; it was not made. Do not retry it unless the user asks."
                )
            }
            NotApproved::NoQueue => "toolgate: this call needs a person's approval, but the client cannot be asked \
                                     and no approval queue is available; it was not made"
                .into(),
            NotApproved::QueueFull(exceeded) => {
                let (scope, limit, _) = exceeded.setting();
                format!(
                    "toolgate: this call to {tool} needs a person's approval, but this {scope} already has {limit} \
                     approvals waiting, the most allowed; it was not made. Wait for those to be decided before \
                     asking again."
                )
            }
            // A store's error names paths, hosts and schema: the model reads only what happened.
            NotApproved::CannotQueue(_) => {
                "toolgate: cannot queue the approval (the approval store is unavailable); the call was not made".into()
            }
            NotApproved::Unusable { by, store_failed: true, .. } => format!(
                "toolgate: the approval by {by} could not be used (the approval store is unavailable); the call was \
                 not made"
            ),
            NotApproved::Unusable { by, error, store_failed: false } => {
                format!("toolgate: the approval by {by} could not be used ({error})")
            }
            NotApproved::DeniedBy(by) => format!("toolgate: {by} denied this call to {tool}; it was not made"),
            NotApproved::TimedOut(seconds) => {
                format!("toolgate: nobody approved this call within {seconds} s; it was not made")
            }
            NotApproved::AlreadyUsed => "toolgate: that approval was already used".into(),
            NotApproved::LapsedUndecided => {
                "toolgate: the approval lapsed before anyone decided; the call was not made".into()
            }
            NotApproved::WaitFailed(_) => {
                "toolgate: waiting for approval failed (the approval store is unavailable); the call was not made"
                    .into()
            }
        }
    }
}

/// Longest argument summary shown to a person.
const SUMMARY_CHARS: usize = 600;

/// Longest tool name, upstream name or title shown in a question.
const NAME_CHARS: usize = 80;

/// The `_meta` key that marks an `elicitation/create` as toolgate's own question. Relayed upstream requests never
/// carry it (`upstream_events` strips every `toolgate/` key an upstream sets), so a client can tell the two apart.
pub(crate) const QUESTION_META: &str = "toolgate/question";

/// The confirmation a person reads, in a fixed structure: every part an upstream or the model chose (tool name,
/// upstream name, title, action phrase, arguments, a rule's text) is quoted or JSON, escaped and bounded, each on
/// the line its label starts, so no title can end a quote, start a line or push the real facts out of sight.
fn question_text(tool: &ExposedTool, summary: &str, reasons: &[&str]) -> String {
    let reasons: Vec<String> = reasons.iter().map(|reason| quoted(reason, SUMMARY_CHARS)).collect();
    format!(
        "toolgate asks: allow this tool call?\nTool: {} on upstream {}\nTitle (from the upstream): {}\nAction: {} \
         (risk {} of 4, {})\nArguments: {summary}\nWhy you are asked: {}",
        quoted(&tool.exposed_name, NAME_CHARS),
        quoted(&tool.upstream_name, NAME_CHARS),
        quoted(&tool.facts.display_title, NAME_CHARS),
        quoted(&tool.facts.action, NAME_CHARS),
        tool.facts.risk_level,
        tool.facts.category.as_str(),
        reasons.join("; ")
    )
}

/// What a person is asked about: a call of `tool` (`params`: the client's `tools/call` params), and the decision
/// that asks.
pub(crate) struct Question<'a> {
    pub(crate) tool: &'a Arc<ExposedTool>,
    pub(crate) params: &'a Value,
    pub(crate) decision: &'a Decision,
}

/// Asks a person about one call. `None` when the client cancelled the call meanwhile. As the person is asked, the
/// call's audit row is journaled into `row` (kind `call`, verdict `confirm`, the approval id when it is queued),
/// for the caller to forward with or complete; a call approved for this session already asks nobody and leaves
/// `row` empty.
pub(crate) async fn confirm(
    context: &CallContext<'_>,
    question: &Question<'_>,
    row: &mut Option<PendingCall>,
) -> Option<Confirmation> {
    let CallContext { gateway, session, .. } = *context;
    let Question { tool, params, decision } = *question;
    let spec = &gateway.spec.guardrails.confirmation;
    let arguments = &params.get("arguments").cloned().unwrap_or_else(|| json!({}));
    // Bound to the upstream and the tool's own name too: a fingerprint alone could be shared by tools elsewhere.
    let bound =
        BoundTool { upstream: &tool.upstream_name, original_name: &tool.original_name, fingerprint: &tool.fingerprint };
    // And to the upstream's slot: the name survives a reload that points it elsewhere (other arguments or
    // environment, same definitions); the slot does not, since a restarted upstream gets a new one.
    let shape_key =
        bind_approval(ApprovalScope::Shape, bound, Some(arguments)).ok().map(|binding| (tool.upstream, binding.key));
    if let Some(key) = &shape_key
        && session.remembered.lock().map(|remembered| remembered.contains(key)).unwrap_or(false)
    {
        return Some(Confirmation::Approved {
            approval_id: None,
            via: ApprovedVia::Remembered,
            tool: Arc::clone(tool),
        });
    }
    let summary = summarize(arguments);
    let reasons: Vec<&str> = decision.reasons.iter().take(2).map(|reason| reason.detail.as_str()).collect();
    // A modern (2026-07-28) request never accepts a request from the server (no pushed elicitation): one that
    // declared form elicitation in its own `_meta` is asked by an `input_required` round trip, or, as
    // `[confirmation] modern` says, one that declared URL mode is sent to the console's page of a detached approval
    // (`guard::console_round`); any other waits in the approval queue, like a legacy client without elicitation,
    // whatever its stdio session once declared.
    let modern = crate::era::is_modern(Some(params));
    let mode =
        if modern && spec.via == ConfirmVia::ElicitationWhenAvailable { modern_mode(spec, params) } else { None };
    if let Some(console_url) = mode.and_then(|mode| mode.console_url) {
        let message = format!(
            "{}\nOpen the link to approve or deny this call in toolgate's console, then let the call be retried.",
            question_text(tool, &summary, &reasons)
        );
        let question = json!({"message": message, "_meta": {QUESTION_META: {"kind": "confirmation"}}});
        let asked = UrlQuestion { tool, params, console_url, question, summary: &summary };
        let round = console_round::confirm(context, &asked).await;
        return by_console(gateway, tool, question_row(session, tool, decision, arguments), round, row).await;
    }
    if mode.is_some() {
        // No "remember" box: a modern client has no session to remember it in.
        let asked = confirmation_params(&question_text(tool, &summary, &reasons), false);
        let confirmation = match round_trip::confirm(context, tool, params, &asked).await {
            RoundTrip::Ask(result) => Confirmation::InputRequired(result),
            RoundTrip::Approved => {
                Confirmation::Approved { approval_id: None, via: ApprovedVia::RoundTrip, tool: Arc::clone(tool) }
            }
            RoundTrip::Declined { cancelled } => Confirmation::Refused(NotApproved::Declined { cancelled }),
            RoundTrip::Lapsed(lapse) => Confirmation::Lapsed { lapse, approval_id: None },
            RoundTrip::Refused(refusal) => Confirmation::StateRefused(refusal),
            RoundTrip::NoStore => Confirmation::Refused(NotApproved::NoQueue),
        };
        return Some(confirmation);
    }
    let can_ask = session.declares_form_elicitation() && !modern;
    let confirmation = if spec.via == ConfirmVia::ElicitationWhenAvailable && can_ask {
        match audit::record_waiting(gateway, audit::call_row(session, tool, decision, arguments, None)).await {
            Ok(journaled) => *row = journaled,
            Err(error) => return Some(Confirmation::Unrecorded(error)),
        }
        let answer = by_elicitation(context, tool, &summary, &reasons).await?;
        match answer {
            Confirmation::Approved { via, .. } => match recheck(gateway, session, params, tool) {
                Ok(current) => Confirmation::Approved { approval_id: None, via, tool: current },
                Err(lapse) => Confirmation::Lapsed { lapse, approval_id: None },
            },
            other => other,
        }
    } else {
        by_queue(context, question, &summary, row).await?
    };
    if let (Confirmation::Approved { via: ApprovedVia::ElicitationRemember, .. }, Some(key)) =
        (&confirmation, shape_key)
        && let Ok(mut remembered) = session.remembered.lock()
    {
        remembered.insert(key);
    }
    Some(confirmation)
}

/// How a modern request is asked, when it is: the console's base URL for URL mode, `None` for the form.
#[derive(Clone, Copy)]
struct ModernMode<'a> {
    console_url: Option<&'a str>,
}

/// How `[confirmation] modern` asks a 2026-07-28 request, given the modes it declared in its own `_meta`; `None`:
/// it cannot be asked (it waits in the queue).
fn modern_mode<'a>(spec: &'a ConfirmationSpec, params: &Value) -> Option<ModernMode<'a>> {
    let form = round_trip::declares_form_elicitation(params);
    let url = round_trip::declares_url_elicitation(params).then_some(spec.console_url.as_deref()).flatten();
    let (form, url) =
        (form.then_some(ModernMode { console_url: None }), url.map(|url| ModernMode { console_url: Some(url) }));
    match spec.modern {
        ModernConfirm::Form => form,
        ModernConfirm::Auto => form.or(url),
        ModernConfirm::Console => url.or(form),
    }
}

/// The `call` row of a URL-mode round, naming its approval.
fn question_row<'a>(
    session: &'a SessionShared,
    tool: &'a ExposedTool,
    decision: &'a Decision,
    arguments: &'a Value,
) -> impl FnOnce(&ApprovalId) -> toolgate_store::AuditEntry + 'a {
    move |approval| audit::call_row(session, tool, decision, arguments, Some(approval.as_str().to_owned()))
}

/// A URL-mode round's end as a [`Confirmation`]. A round that names its approval journals the call's row with it
/// into `row` first (completed by the end phase with the outcome, or forwarded with), as the queue does.
async fn by_console(
    gateway: &Shared,
    tool: &Arc<ExposedTool>,
    call_row: impl FnOnce(&ApprovalId) -> toolgate_store::AuditEntry,
    round: ConsoleRound,
    row: &mut Option<PendingCall>,
) -> Option<Confirmation> {
    let approval = match &round {
        ConsoleRound::Ask { approval, .. }
        | ConsoleRound::Approved { approval }
        | ConsoleRound::Denied { approval, .. }
        | ConsoleRound::Declined { approval, .. }
        | ConsoleRound::Expired { approval, .. }
        | ConsoleRound::AlreadyUsed { approval }
        | ConsoleRound::LapsedUndecided { approval }
        | ConsoleRound::ToolChanged { approval, .. }
        | ConsoleRound::Unusable { approval, .. }
        | ConsoleRound::Withdrawn { approval } => Some(approval.clone()),
        _ => None,
    };
    if let Some(approval) = &approval {
        match audit::record_waiting(gateway, call_row(approval)).await {
            Ok(journaled) => *row = journaled,
            Err(error) => {
                if let (ConsoleRound::Ask { .. }, Some(store)) = (&round, &gateway.store) {
                    // Nobody may decide a call that has no row.
                    let _ = store.approvals().lapse(approval, "the audit log cannot be written").await;
                }
                return Some(Confirmation::Unrecorded(error));
            }
        }
    }
    let id = approval.map(|approval| approval.as_str().to_owned());
    let refused = |not_approved| Some(Confirmation::Refused(not_approved));
    // Approved: the tool as this retry resolved it from the current catalog and policy, the definition the state
    // and the store's approval were checked against.
    let tool = Arc::clone(tool);
    match round {
        ConsoleRound::Ask { result, .. } => Some(Confirmation::InputRequired(result)),
        ConsoleRound::ConfirmedEarlier => {
            Some(Confirmation::Approved { approval_id: None, via: ApprovedVia::RoundTrip, tool })
        }
        ConsoleRound::Approved { .. } => {
            Some(Confirmation::Approved { approval_id: id, via: ApprovedVia::Console, tool })
        }
        ConsoleRound::Denied { by, .. } => refused(NotApproved::DeniedBy(by)),
        ConsoleRound::Declined { cancelled, .. } => refused(NotApproved::Declined { cancelled }),
        ConsoleRound::Expired { after, .. } => refused(NotApproved::TimedOut(after.as_secs())),
        ConsoleRound::AlreadyUsed { .. } => refused(NotApproved::AlreadyUsed),
        ConsoleRound::LapsedUndecided { .. } => refused(NotApproved::LapsedUndecided),
        ConsoleRound::ToolChanged { lapse, .. } => Some(Confirmation::Lapsed { lapse, approval_id: id }),
        ConsoleRound::Unusable { by, error, store_failed, .. } => {
            refused(NotApproved::Unusable { by, error, store_failed })
        }
        ConsoleRound::Withdrawn { .. } => None,
        ConsoleRound::Refused(refusal) => Some(Confirmation::StateRefused(refusal)),
        ConsoleRound::QueueFull(exceeded) => refused(NotApproved::QueueFull(exceeded)),
        ConsoleRound::CannotQueue(error) => refused(NotApproved::CannotQueue(error)),
        ConsoleRound::NoStore => refused(NotApproved::NoQueue),
    }
}

/// Asks the client's user with `elicitation/create` (the confirmation settings' timeout, and "remember" when
/// configured); `None` when the call is cancelled meanwhile.
async fn by_elicitation(
    context: &CallContext<'_>,
    tool: &Arc<ExposedTool>,
    summary: &str,
    reasons: &[&str],
) -> Option<Confirmation> {
    let CallContext { gateway, session, id: request_id, cancel } = *context;
    let spec = &gateway.spec.guardrails.confirmation;
    let (timeout, offer_remember) = (spec.timeout, spec.remember_for_session);
    let params = confirmation_params(&question_text(tool, summary, reasons), offer_remember);
    let answer = tokio::select! {
        () = cancel.cancelled() => return None,
        answer = session.ask_client(request_id.clone(), "elicitation/create", Some(params), timeout) => answer,
    };
    let Some(answer) = answer else {
        return Some(Confirmation::Refused(NotApproved::NobodyAnswered));
    };
    let result = answer.get("result").cloned().unwrap_or(Value::Null);
    let action = result.get("action").and_then(Value::as_str).unwrap_or("cancel");
    let approved = action == "accept" && result.pointer("/content/approve") == Some(&Value::Bool(true));
    if !approved {
        return Some(Confirmation::Refused(NotApproved::Declined { cancelled: action == "cancel" }));
    }
    let remember = offer_remember && result.pointer("/content/remember") == Some(&Value::Bool(true));
    Some(Confirmation::Approved {
        approval_id: None,
        via: if remember { ApprovedVia::ElicitationRemember } else { ApprovedVia::Elicitation },
        tool: Arc::clone(tool),
    })
}

/// The `elicitation/create` params of toolgate's confirmation (pushed to a legacy client, or under
/// `inputRequests` of a 2026-07-28 answer): `message` (from [`question_text`]) and a form with one required
/// `approve` box, and `remember` when offered.
pub(crate) fn confirmation_params(message: &str, offer_remember: bool) -> Value {
    // No property has a default: a client that fills a form from its defaults (or submits it untouched) must not
    // answer for the person, either way. `approve` is required, so an untouched form is not an answer at all.
    let mut properties = json!({
        "approve": {"type": "boolean", "title": "Allow this call"}
    });
    if offer_remember {
        properties["remember"] = json!({
            "type": "boolean",
            "title": "Also allow this tool with arguments of the same shape for the rest of this session"
        });
    }
    json!({
        "message": message,
        "requestedSchema": {"type": "object", "properties": properties, "required": ["approve"]},
        "_meta": {QUESTION_META: {"kind": "confirmation"}}
    })
}

/// Puts the call in the store's approval queue and waits (bounded) for a person's decision there; the call's row
/// is journaled into `row` once the approval is queued. `None` when the call is cancelled meanwhile.
async fn by_queue(
    context: &CallContext<'_>,
    question: &Question<'_>,
    summary: &str,
    row: &mut Option<PendingCall>,
) -> Option<Confirmation> {
    let CallContext { gateway, session, id: request_id, cancel } = *context;
    let Question { tool, params, decision } = *question;
    let arguments = &params.get("arguments").cloned().unwrap_or_else(|| json!({}));
    let Some(store) = &gateway.store else {
        return Some(Confirmation::Refused(NotApproved::NoQueue));
    };
    // Held while the call waits: past the cap, refused (and audited) rather than queued.
    let _slot = match gateway.approval_quota.reserve(&session.id, &session.caller.name) {
        Ok(slot) => slot,
        Err(exceeded) => return Some(Confirmation::Refused(NotApproved::QueueFull(exceeded))),
    };
    let spec = &gateway.spec.guardrails.confirmation;
    let args_digest = digest_arguments(arguments);
    let pending = new_approval(gateway, session, tool, summary, args_digest.clone());
    if let Err(error) = store.approvals().create(&pending).await {
        tracing::error!(%error, "cannot queue an approval");
        return Some(Confirmation::Refused(NotApproved::CannotQueue(error.to_string())));
    }
    // From here until a decision reaches the call, however the call ends its approval leaves the queue.
    let waiting = QueuedCall::new(gateway, session, tool.upstream, &pending.id, cancel);
    let entry = audit::call_row(session, tool, decision, arguments, Some(pending.id.as_str().to_owned()));
    match audit::record_waiting(gateway, entry).await {
        Ok(journaled) => *row = journaled,
        Err(error) => {
            // Nobody may decide a call that has no row: the approval leaves the queue before anyone sees it.
            waiting.lapse("the audit log cannot be written").await;
            return Some(Confirmation::Unrecorded(error));
        }
    }
    tracing::warn!(
        tool = %tool.exposed_name,
        upstream = %tool.upstream_name,
        approval = %pending.id,
        "a call waits for approval: run `toolgate approvals list`"
    );
    tell_where_it_waits(gateway, session, request_id, params, tool, &pending.id, spec.timeout);
    let approvals = store.approvals();
    let wait = tokio::select! {
        () = cancel.cancelled() => {
            let why = waiting.why_it_ended();
            waiting.lapse(why).await;
            return None;
        }
        wait = approvals.wait(&pending.id, spec.timeout) => wait,
    };
    let outcome = match wait {
        // Consumed with the fingerprint of the tool as it is now, so the store's binding is checked against what
        // the call would reach, not against what the person was shown.
        Ok(ApprovalWait::Approved { by }) => match recheck(gateway, session, params, tool) {
            Err(lapse) => {
                // The end phase completes the call's row with why (`tool_changed`).
                waiting.lapse(lapse.why).await;
                Confirmation::Lapsed { lapse, approval_id: Some(pending.id.as_str().to_owned()) }
            }
            Ok(current) => match store.approvals().consume(&pending.id, &current.fingerprint, &args_digest).await {
                Ok(()) => {
                    waiting.used();
                    Confirmation::Approved {
                        approval_id: Some(pending.id.as_str().to_owned()),
                        via: ApprovedVia::Queue,
                        tool: current,
                    }
                }
                Err(error) => {
                    waiting.lapse("the approval could not be used").await;
                    let store_failed = !matches!(error, StoreError::ApprovalRefused { .. });
                    if store_failed {
                        tracing::error!(%error, approval = %pending.id, "an approved call's approval cannot be used");
                    }
                    Confirmation::Refused(NotApproved::Unusable { by, error: error.to_string(), store_failed })
                }
            },
        },
        Ok(ApprovalWait::Denied { by }) => {
            waiting.used();
            Confirmation::Refused(NotApproved::DeniedBy(by))
        }
        Ok(ApprovalWait::AlreadyConsumed) => {
            waiting.used();
            Confirmation::Refused(NotApproved::AlreadyUsed)
        }
        // Lapsed by this gateway as it stops (before it closes the sessions): the call is being withdrawn, and its
        // row says so (`withdrawn`, "the gateway stopped"), whichever of the two this task sees first.
        Ok(ApprovalWait::Lapsed) if gateway.shutdown.is_cancelled() || session.closed.is_cancelled() => {
            waiting.used();
            return None;
        }
        Ok(ApprovalWait::Lapsed) => {
            waiting.used();
            Confirmation::Refused(NotApproved::LapsedUndecided)
        }
        Ok(ApprovalWait::Expired | ApprovalWait::TimedOut) => {
            let timeout = spec.timeout.as_secs();
            waiting.lapse(&format!("nobody decided within {timeout} s; the call was refused")).await;
            Confirmation::Refused(NotApproved::TimedOut(timeout))
        }
        Err(error) => {
            tracing::error!(%error, approval = %pending.id, "waiting for an approval's decision failed");
            waiting.lapse("waiting for the decision failed").await;
            Confirmation::Refused(NotApproved::WaitFailed(error.to_string()))
        }
    };
    Some(outcome)
}

/// The tool approved as `approved`, as the current catalog and policy have it for this session (see
/// [`current_tool`]).
fn recheck(
    gateway: &Shared,
    session: &SessionShared,
    params: &Value,
    approved: &ExposedTool,
) -> Result<Arc<ExposedTool>, Lapse> {
    current_tool(&gateway.catalog(), &gateway.policy(), &session.viewer_for(params), approved)
}

/// A short, readable summary of the arguments for a person (never used to bind the approval).
/// The arguments as a person reads them: whole up to [`SUMMARY_CHARS`], else cut with a count of what is not shown,
/// so a long harmless start cannot hide what follows without the person being told.
/// One-line JSON with every control, bidi and invisible character escaped (`core::display::json_text`), so an
/// argument key or value cannot rewrite the line it is shown on.
fn summarize(arguments: &Value) -> String {
    let text = json_text(arguments, SUMMARY_CHARS);
    if text.ends_with(" more characters]") {
        format!("{text} (not shown; approving approves all of them)")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_long_argument_summary_says_how_much_it_does_not_show() {
        let short = json!({"path": "notes/a.txt"});
        assert_eq!(summarize(&short), r#"{"path":"notes/a.txt"}"#);
        let long = json!({"text": format!("{}rm -rf /", "harmless ".repeat(100))});
        let summary = summarize(&long);
        let hidden = serde_json::to_string(&long).map(|text| text.chars().count()).unwrap_or_default() - SUMMARY_CHARS;
        assert!(
            summary.ends_with(&format!("\\[{hidden} more characters] (not shown; approving approves all of them)"))
        );
        assert!(!summary.contains("rm -rf"), "the cut part is not shown, but its size is: {summary}");
        let hostile = json!({"path\r\u{1b}[2K": "~/.ssh/id_rsa\u{202e}"});
        assert_eq!(summarize(&hostile), r#"{"path\r\u001b[2K":"~/.ssh/id_rsa\u202e"}"#);
    }
}
