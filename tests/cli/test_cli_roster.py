"""`grader roster list | deactivate | reactivate | remove | rotate-token` and a checked `roster import`, on this
host's database and through the API (real HTTP, SQLite, nothing grades)."""
import requests

from .cli_helpers import invoke, one_line_error


def local_env(tmp_path) -> dict:
    return {"GRADER_INSTANCE_PATH": str(tmp_path / "instance"), "GRADER_DATABASE_URL": f"sqlite:///{tmp_path}/g.sqlite",
            "GRADER_BROKER_URL": "memory://"}


def listed(ran) -> dict:
    """roster id -> state, from `grader roster list`'s lines."""
    return {line.split()[0]: line.split()[1] for line in ran.out.splitlines() if line.strip()}


def me(server, token) -> requests.Response:
    return requests.get(f"{server.url}/api/v1/me", headers={"Authorization": f"Bearer {token}"}, timeout=10)


def test_a_roster_with_bad_rows_is_a_usage_error_naming_every_row(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("username,name,email\nann,Ann,ann@example.edu\nbad user!,B,\ncid,Cid,x\n")
    ran = invoke("roster", "import", roster, env=local_env(tmp_path))
    line = one_line_error(ran)
    assert ran.code == 2 and "2 problems, nothing imported" in line, line
    assert "line 3: username 'bad user!'" in line and "line 4: e-mail 'x' is not an address" in line, line
    assert invoke("roster", "list", env=local_env(tmp_path)).out.strip() == "nobody on the roster"


def test_the_state_commands_on_this_hosts_database(tmp_path):
    env = local_env(tmp_path)
    roster = tmp_path / "roster.csv"
    roster.write_text("username,name,email\nann,Ann,ann@example.edu\nben,Ben,\n")
    assert invoke("roster", "import", roster, env=env).code == 0
    ran = invoke("roster", "deactivate", "ann", env=env)
    assert ran.code == 0 and "ann is deactivated" in ran.out, ran.err
    assert listed(invoke("roster", "list", env=env)) == {"ann": "deactivated", "ben": "active"}
    rotated = invoke("roster", "rotate-token", "ben", env=env)
    assert rotated.code == 0 and rotated.out.strip().startswith("gr_") and "0 earlier token(s) revoked" in rotated.err
    removed = invoke("roster", "remove", "ben", env=env)
    assert "ben is removed" in removed.out and "1 token(s) revoked" in removed.out, removed.out
    assert listed(invoke("roster", "list", env=env)) == {"ann": "deactivated"}
    assert listed(invoke("roster", "list", "--removed", env=env)) == {"ann": "deactivated", "ben": "removed"}
    back = invoke("roster", "reactivate", "ben", env=env)
    assert "ben is active" in back.out and "rotate-token ben" in back.out, back.out
    unknown = invoke("roster", "remove", "zed", env=env)
    assert unknown.code == 1 and "no student 'zed'" in unknown.err


def test_the_state_commands_through_the_api(api_server, tmp_path):
    env = api_server.env()
    roster = tmp_path / "roster.csv"
    roster.write_text("username,name,email\ndeb,Deb,deb@example.edu\n")
    assert invoke("roster", "import", roster, env=env).code == 0
    rotated = invoke("roster", "rotate-token", "deb", env=env)
    token = rotated.out.strip()
    assert rotated.code == 0 and me(api_server, token).json()["student"] == "deb"
    assert invoke("roster", "deactivate", "deb", env=env).code == 0
    refused = me(api_server, token)
    assert refused.status_code == 403 and "deb is deactivated" in refused.json()["message"]
    assert listed(invoke("roster", "list", env=env))["deb"] == "deactivated"
    assert invoke("roster", "reactivate", "deb", env=env).code == 0
    assert me(api_server, token).status_code == 200
    again = invoke("roster", "rotate-token", "deb", env=env)
    assert "1 earlier token(s) revoked" in again.err and me(api_server, token).status_code == 401
    gone = invoke("roster", "remove", "deb", env=env)
    assert gone.code == 0 and "1 token(s) revoked" in gone.out
    assert "deb" not in listed(invoke("roster", "list", env=env))
    as_student = invoke("roster", "deactivate", "alice", env=api_server.env(api_server.course.bob))
    assert as_student.code == 4 and "403" in one_line_error(as_student), "instructor tokens only"
