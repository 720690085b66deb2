//! `lastword requeue`, `lastword compensate` and `lastword audit` against a real database on
//! both backends: exit 0 when applied (or replayed), 3 when refused, and the rows they write.

use lastword_core::Tokens;
use lastword_server::act::{self, ActorArgs, CompensateArgs, OneTask, RequeueArgs};
use lastword_store::testing::{insert_task, scalar};
use lastword_store::{store_for, Db};
use std::process::ExitCode;

fn requeue_args(task: Option<i64>, epoch: Option<i64>) -> RequeueArgs {
    RequeueArgs {
        task,
        reason: "upstream recovered".into(),
        expected_epoch: epoch,
        expected_status: None,
        fence: false,
        retry_deterministic: false,
        filter: None,
        expect: None,
        unsafe_ok: false,
        request_id: Some("cli-1".into()),
        who: ActorArgs { actor: Some("ops-script".into()), json: false },
    }
}

async fn requeue_applies_once_and_a_stale_epoch_exits_3(db: Db) {
    let store = store_for(db.clone(), Tokens::default());
    let id = insert_task(&db, "reply", "idempotent", chrono::Utc::now()).await;
    lastword_store::testing::exec(
        &db,
        "UPDATE tasks SET status = 'dead', lease_epoch = 4 WHERE id = $1",
        &[id.into()],
    )
    .await;

    let stale = RequeueArgs { request_id: None, ..requeue_args(Some(id), Some(3)) };
    assert_eq!(act::requeue(store.as_ref(), stale).await.unwrap(), ExitCode::from(3));
    assert_eq!(scalar(&db, "SELECT lease_epoch FROM tasks WHERE id = $1", &[id.into()]).await, 4);

    assert_eq!(
        act::requeue(store.as_ref(), requeue_args(Some(id), Some(4))).await.unwrap(),
        ExitCode::SUCCESS
    );
    // Run again (a retried script): replayed, still one audit row.
    assert_eq!(
        act::requeue(store.as_ref(), requeue_args(Some(id), Some(4))).await.unwrap(),
        ExitCode::SUCCESS
    );
    assert_eq!(scalar(&db, "SELECT lease_epoch FROM tasks WHERE id = $1", &[id.into()]).await, 5);
    assert_eq!(
        scalar(
            &db,
            "SELECT COUNT(*) FROM operator_actions WHERE actor = 'ops-script' AND action = 'requeue' AND outcome = 'applied'",
            &[]
        )
        .await,
        1
    );

    // Bad input is an error before the database is touched.
    let blank = RequeueArgs { reason: "  ".into(), ..requeue_args(Some(id), Some(5)) };
    assert!(act::requeue(store.as_ref(), blank).await.is_err());
    assert!(act::requeue(store.as_ref(), requeue_args(None, None)).await.is_err());

    // A filter without --expect only previews.
    let preview = RequeueArgs {
        task: None,
        expected_epoch: None,
        filter: Some("cause=timeout".into()),
        ..requeue_args(None, None)
    };
    assert_eq!(act::requeue(store.as_ref(), preview).await.unwrap(), ExitCode::SUCCESS);
    assert_eq!(scalar(&db, "SELECT COUNT(*) FROM operator_actions WHERE outcome = 'applied'", &[]).await, 1);

    // --expect names the previewed set by its token: a made-up token is refused (exit 3),
    // the preview's own applies.
    let filter = || RequeueArgs {
        task: None,
        expected_epoch: None,
        filter: Some("cause=timeout".into()),
        request_id: None,
        ..requeue_args(None, None)
    };
    let selection = lastword_core::BulkSelection::Filter(
        lastword_core::query::parse_bulk_filter(
            &[("cause".into(), "timeout".into())],
            chrono::Utc::now(),
            &[],
        )
        .unwrap(),
    );
    let preview = store
        .requeue_preview(&selection, lastword_core::BulkOptions::default(), chrono::Utc::now())
        .await
        .unwrap();
    let wrong = RequeueArgs { expect: Some("0000000000000000-1".into()), ..filter() };
    assert_eq!(act::requeue(store.as_ref(), wrong).await.unwrap(), ExitCode::from(3));
    assert_eq!(scalar(&db, "SELECT COUNT(*) FROM operator_actions WHERE outcome = 'applied'", &[]).await, 1);
    let right = RequeueArgs { expect: Some(preview.token.clone()), ..filter() };
    assert_eq!(act::requeue(store.as_ref(), right).await.unwrap(), ExitCode::SUCCESS);
    assert_eq!(
        scalar(&db, "SELECT COUNT(*) FROM operator_actions WHERE outcome = 'applied'", &[]).await,
        1 + preview.tasks.len() as i64
    );
}

async fn compensate_of_a_task_that_ran_once_exits_3(db: Db) {
    let store = store_for(db.clone(), Tokens::default());
    let id = insert_task(&db, "reply", "unsafe", chrono::Utc::now()).await;
    let args = CompensateArgs {
        on: OneTask {
            task: id,
            expected_epoch: None,
            request_id: None,
            who: ActorArgs { actor: Some("alice".into()), json: true },
        },
        reason: "refunded".into(),
        reference: Some("RF-1".into()),
        undo: false,
    };
    assert_eq!(act::compensate(store.as_ref(), args).await.unwrap(), ExitCode::from(3));
    assert_eq!(scalar(&db, "SELECT COUNT(*) FROM operator_actions WHERE outcome = 'applied'", &[]).await, 0);
    // The refused attempt is recorded as coming from the command line.
    assert_eq!(
        scalar(
            &db,
            "SELECT COUNT(*) FROM operator_actions WHERE actor = 'alice' AND via = 'cli' \
             AND outcome = 'refused:nothing_to_compensate'",
            &[]
        )
        .await,
        1
    );
}

lastword_store::on_every_backend!(
    requeue_applies_once_and_a_stale_epoch_exits_3,
    compensate_of_a_task_that_ran_once_exits_3
);
