//! The gateway behind an upstream proxy, on loopback: a small forward proxy
//! written here (`common::ConnectProxy`) resolves `.test` names this host
//! cannot, as a company's proxy would. Brokered TLS, tunnels and plain HTTP
//! go through it with its credentials; the address rules still hold before
//! anything reaches it.

mod common;

use common::*;
use reeval_gateway::{
    Binding, Egress, GatewayOptions, Policy, Refusal, Route, SecretString, UpstreamProxy,
};

/// `Basic` of `user:p@ss`.
const AUTHORIZATION: &str = "Basic dXNlcjpwQHNz";

#[tokio::test]
async fn brokered_tunnelled_and_plain_requests_go_through_the_proxy_with_its_credentials() {
    let pki = TestPki::new();
    let api = upstream(Some(pki.server_config(&["api.test"])), Behaviour::Echo).await;
    let tunnel = upstream(Some(pki.server_config(&["tunnel.test"])), Behaviour::Echo).await;
    let plain = upstream(None, Behaviour::Echo).await;
    let proxy = ConnectProxy::start(
        vec![
            ("api.test".into(), api.addr),
            ("tunnel.test".into(), tunnel.addr),
            ("plain.test".into(), plain.addr),
        ],
        Some(AUTHORIZATION),
    )
    .await;
    let url = format!("http://user:p%40ss@{}", proxy.addr);
    let options = GatewayOptions::default()
        .extra_root_pem(pki.ca_pem.clone())
        .upstream_proxy(Some(UpstreamProxy::new(&url).unwrap()));
    let binding =
        Binding::new("K", "api.test", "x-api-key", PLACEHOLDER, SecretString::from(SECRET))
            .unwrap();
    let allowed = ["api.test", "tunnel.test", "plain.test", "10.9.8.7", "127.0.0.1"];
    let h = gateway(
        options,
        Policy::new(Egress::list(allowed).unwrap()).activate(["K"]),
        vec![binding],
    )
    .await;

    let c = client(&h.proxy, &[h.gateway.ca_pem(), &pki.ca_pem]);
    let resp = c.post("https://api.test/v1/messages").header("x-api-key", PLACEHOLDER).send();
    let resp = resp.await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "hello from upstream");
    assert_eq!(api.seen()[0].headers["x-api-key"], SECRET, "swapped, through the proxy");
    let resp = c.get("https://tunnel.test/t").send().await.unwrap();
    assert_eq!(
        (resp.status().as_u16(), resp.text().await.unwrap().as_str()),
        (200, "hello from upstream")
    );
    let resp = c.get("http://plain.test/p?q=1").send().await.unwrap();
    assert_eq!(
        (resp.status().as_u16(), resp.text().await.unwrap().as_str()),
        (200, "hello from upstream")
    );
    assert_eq!(
        plain.seen()[0].headers.get("proxy-authorization"),
        None,
        "the proxy's, not the upstream's"
    );

    // The address rules hold before the proxy is asked: 10.9.8.7 is private, 127.0.0.1 this host's.
    for url in ["http://10.9.8.7/", "http://127.0.0.1:9/"] {
        let resp = c.get(url).send().await.unwrap();
        assert_eq!(resp.status(), 403, "{url}");
        let body = resp.text().await.unwrap();
        assert!(body.contains("allow_internal"), "{url}: {body}");
    }
    drop(c);

    let asked: Vec<String> = proxy.asked().iter().map(|a| a.line.clone()).collect();
    assert_eq!(
        asked,
        [
            "CONNECT api.test:443 HTTP/1.1",
            "CONNECT tunnel.test:443 HTTP/1.1",
            "GET http://plain.test/p?q=1 HTTP/1.1"
        ],
        "TLS and tunnels by CONNECT, plain HTTP in absolute form, refusals never"
    );
    assert!(proxy.asked().iter().all(|a| a.authorization.as_deref() == Some(AUTHORIZATION)));

    let log = wait_log(&h.attempt, 5).await;
    let api_entry = log.iter().find(|e| e.host == "api.test").unwrap();
    assert_eq!((api_entry.route, api_entry.status), (Route::Intercept, 200));
    assert_eq!(api_entry.brokered, ["K"]);
    let refusals: Vec<_> = log.iter().filter_map(|e| e.refusal.clone()).collect();
    assert!(
        matches!(
            refusals.as_slice(),
            [Refusal::Internal { .. }, Refusal::Closed { .. }]
                | [Refusal::Closed { .. }, Refusal::Internal { .. }]
        ),
        "{refusals:?}"
    );
    let text = serde_json::to_string(&log).unwrap();
    assert!(!text.contains(SECRET) && !text.contains("p@ss") && !text.contains(AUTHORIZATION));
}

#[tokio::test]
async fn a_proxy_that_refuses_is_a_502_naming_it_and_no_proxy_hosts_go_directly() {
    let plain = upstream(None, Behaviour::Echo).await;
    let proxy =
        ConnectProxy::start(vec![("plain.test".into(), plain.addr)], Some(AUTHORIZATION)).await;
    // No credentials: the proxy answers 407.
    let options =
        GatewayOptions::default().resolve("direct.test", plain.addr).upstream_proxy(Some(
            UpstreamProxy::new(&format!("http://{}", proxy.addr)).unwrap().no_proxy("direct.test"),
        ));
    let h = gateway(options, Policy::new(Egress::Any), vec![]).await;
    let (_, status, head) = raw_connect(h.addr, "plain.test:443").await;
    assert_eq!(status, 502, "{head}");
    let log = wait_log(&h.attempt, 1).await;
    let error = log[0].error.clone().unwrap();
    assert!(
        error.contains(&format!("through the upstream proxy http://{}", proxy.addr))
            && error.contains("407"),
        "{error}"
    );
    // NO_PROXY: dialled directly, the proxy never asked.
    let resp = client(&h.proxy, &[]).get("http://direct.test/d").send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(proxy.asked().len(), 1);
    assert_eq!(plain.seen().len(), 1);
}
