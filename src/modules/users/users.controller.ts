import { Body, Controller, Get, HttpCode, Post } from '@nestjs/common';
import { ApiCreatedResponse, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { ApiAuthenticated, ApiErrors } from '../../common/openapi/api-docs';
import { Access, CurrentPrincipal, Principal } from '../../common/auth/principal';
import { CreateUserDto, TokenView, UserView, UserWithToken } from './dto/user.dto';
import { UsersService } from './users.service';

@ApiTags('users')
@ApiAuthenticated()
@Controller('api/v1/users')
export class UsersController {
  constructor(private readonly users: UsersService) {}

  /** Global admins create users and service accounts; the token is shown only in this response. */
  @Post()
  @Access('admin')
  @ApiCreatedResponse({ type: UserWithToken })
  @ApiErrors(400, 409, 413)
  create(@Body() body: CreateUserDto): Promise<UserWithToken> {
    return this.users.createUser(body.name, body.global_role);
  }

  @Get('me')
  @Access('user')
  @ApiOkResponse({ type: UserView })
  me(@CurrentPrincipal() principal: Principal): Promise<UserView> {
    return this.users.me(principal);
  }

  @Post('me/tokens')
  @HttpCode(201)
  @Access('user')
  @ApiCreatedResponse({ type: TokenView })
  @ApiErrors(400, 413)
  issueToken(@CurrentPrincipal() principal: Principal): Promise<TokenView> {
    return this.users.issueToken(principal);
  }
}
